"""Codex as an ``AgentCli``: its executor, doctor checks, sandbox and pricing."""

from __future__ import annotations

from collections.abc import Mapping

from dispatch.agents.cli import AgentCli
from dispatch.agents.codex import reach
from dispatch.agents.codex.doctor import codex_findings
from dispatch.agents.codex.executor import CodexExecutor, configured_model
from vigil import agent_clis
from vigil.config import Settings
from vigil.doctor import Finding


def priced_as(settings: Settings, env: Mapping[str, str]) -> str | Finding:
    """Codex reports no cost: its runs are priced by their model from the table."""
    model = settings.codex.model or configured_model(env)
    if model is not None:
        return model
    return Finding(
        "warn",
        "prices",
        "codex: no model is named ([executors.codex] model, or model in Codex's config.toml): "
        "its runs cannot be priced and count as $0 against the budget",
    )


CODEX = AgentCli(
    agent_clis.CODEX,
    executor=CodexExecutor,
    checks=codex_findings,
    sandbox=reach.sandbox_finding,
    widenings=reach.widenings,
    priced_as=priced_as,
)
