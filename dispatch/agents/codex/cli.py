"""Codex as an ``AgentCli`` (``dispatch.agents.registry``): its executor, doctor
checks, pricing, what its settings let the agent reach and whether its sandbox
starts (its part of ``vigil doctor``'s reach lines, ``dispatch.agents.doctor``).

The probe is ``codex sandbox -c sandbox_mode=… -- true`` in the workspace, with the
agent's environment: Codex's own Linux sandbox (its bubblewrap, then its helper
``codex-linux-sandbox``, which Codex 0.171.0 makes only when ``CODEX_HOME`` lies
outside the temporary folder).
"""

from __future__ import annotations

import platform
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dispatch.agents.cli import USERNS_FIX, AgentCli, Run, outside_dirs, said
from dispatch.agents.codex import probe
from dispatch.agents.codex.doctor import codex_findings
from dispatch.agents.codex.executor import NO_LOGIN_SHELL, WORKSPACE_NETWORK, CodexExecutor, configured_model
from dispatch.agents.codex.rollout import rollout_path
from dispatch.agents.codex.usage import thread_usage
from dispatch.agents.pricing import TokenUsage
from vigil import agent_clis
from vigil.config import Settings
from vigil.doctor import Finding

CODEX_HELPER = "codex-linux-sandbox"


def widenings(settings: Settings, env: Mapping[str, str]) -> list[str]:
    """Each ``[executors.codex]`` setting that lets the agent reach beyond its workspace."""
    cli = settings.codex
    found = []
    if cli.sandbox == "danger-full-access":
        found.append("Codex runs with danger-full-access: the agent's commands can write anywhere, the home too")
    return found + outside_dirs("executors.codex", cli.add_dirs, settings.home)


async def sandbox_finding(settings: Settings, env: Mapping[str, str], cwd: Path, run: Run) -> Finding | None:
    """What Codex's sandbox (``[executors.codex] sandbox``) does in ``cwd``: a
    ``fail`` when it cannot start a command; None when there is none to start
    (``danger-full-access``)."""
    failed = await _problem(settings, env, cwd, run)
    if failed is not None:
        return failed
    if settings.codex.sandbox == "read-only":
        return Finding("warn", "sandbox", "codex: read-only: the agent cannot change files in its workspace")
    if settings.codex.sandbox == "workspace-write":
        return Finding("ok", "sandbox", "codex: workspace-write: the agent writes only in its workspace")
    return None


async def _problem(settings: Settings, env: Mapping[str, str], cwd: Path, run: Run) -> Finding | None:
    """A ``fail`` finding when Codex's sandbox (``[executors.codex] sandbox``) does
    not start a command in ``cwd``; None when it does, when there is no sandbox to
    start (``danger-full-access``), off Linux, or when the CLI itself is missing
    (``dispatch.agents.codex.doctor`` says so)."""
    mode = settings.codex.sandbox
    command = settings.codex.command
    if mode == "danger-full-access" or platform.system() != "Linux":
        return None  # no sandbox; elsewhere Codex's is not bubblewrap
    if shutil.which(command[0], path=env.get("PATH")) is None:
        return None  # the CLI is missing: its own line says so
    argv = [*command, "sandbox", "-c", f'sandbox_mode="{mode}"', *NO_LOGIN_SHELL]
    if mode == "workspace-write":
        argv += WORKSPACE_NETWORK
    code, output = await run([*argv, "--", "true"], env, cwd)
    if code == 0:
        return None
    words = said(output) or f"exit code {code}"
    if CODEX_HELPER in output:
        fix = (
            f"Codex makes its helper {CODEX_HELPER} only when CODEX_HOME is outside the temporary folder "
            "($TMPDIR, else /tmp): move CODEX_HOME (e.g. to ~/.codex) or point TMPDIR elsewhere"
        )
    else:
        fix = f"{USERNS_FIX}, or set [executors.codex] sandbox"
    return Finding(
        "fail", "sandbox", f"codex: its sandbox cannot start a command, so every command would fail ({words}): {fix}"
    )


def priced_as(settings: Settings, env: Mapping[str, str]) -> str | Finding:
    """Codex reports no cost: its runs are priced by their model from the table."""
    model = settings.codex.model or configured_model(env)
    if model is not None:
        return model
    budget = settings.budget.daily_usd is not None
    return Finding(
        "fail" if budget else "warn",
        "prices",
        "codex: no model is named ([executors.codex] model, or model in Codex's config.toml): "
        "its runs cannot be priced and count as $0; a cap on them is refused"
        + ("; under the daily budget every task is refused" if budget else ""),
    )


def session_named(record: Mapping[str, Any]) -> str | None:
    """The thread Codex's ``thread.started`` line names."""
    value = record.get("thread_id") if record.get("type") == "thread.started" else None
    return value if isinstance(value, str) and value else None


def session_left(env: Mapping[str, str], session: str, since_ms: int) -> dict[str, TokenUsage] | None:
    found = rollout_path(env, session)
    if found is None:
        return None
    tokens, model = thread_usage(found, since_ms)
    return {model or "unknown": tokens} if tokens != TokenUsage() else {}


CODEX = AgentCli(
    agent_clis.CODEX,
    executor=CodexExecutor,
    checks=codex_findings,
    sandbox=sandbox_finding,
    widenings=widenings,
    priced_as=priced_as,
    session_named=session_named,
    session_left=session_left,
    own_model=configured_model,
    probe=probe.probe,
    probe_tokens=probe.INPUT_TOKENS,
)
