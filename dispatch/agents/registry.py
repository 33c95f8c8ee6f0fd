"""Every agent CLI Vigil runs, by its executor's name: a new CLI is a folder under
``dispatch/agents/`` and one entry here (and its facts in ``vigil.agent_clis``)."""

from __future__ import annotations

from collections.abc import Mapping

from dispatch.agents.claude.cli import CLAUDE
from dispatch.agents.cli import AgentCli
from dispatch.agents.codex.cli import CODEX

AGENT_CLIS: Mapping[str, AgentCli] = {cli.facts.name: cli for cli in (CLAUDE, CODEX)}
