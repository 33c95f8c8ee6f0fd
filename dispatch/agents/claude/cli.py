"""Claude Code as an ``AgentCli``: its executor, doctor checks, sandbox and pricing."""

from __future__ import annotations

from collections.abc import Mapping

from dispatch.agents.claude import reach
from dispatch.agents.claude.doctor import claude_findings
from dispatch.agents.claude.executor import ClaudeExecutor
from dispatch.agents.cli import AgentCli
from vigil import agent_clis
from vigil.config import Settings
from vigil.doctor import Finding


def priced_as(settings: Settings, env: Mapping[str, str]) -> Finding:
    """Its own figure: the budget counts it; the table only gives ``api_cost_usd``."""
    return Finding("ok", "prices", "claude: each run is priced by Claude Code's own total_cost_usd")


CLAUDE = AgentCli(
    agent_clis.CLAUDE,
    executor=ClaudeExecutor,
    checks=claude_findings,
    sandbox=reach.sandbox_finding,
    widenings=reach.widenings,
    priced_as=priced_as,
)
