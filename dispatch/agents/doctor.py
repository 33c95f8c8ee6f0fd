"""Whether the configured agent CLI can work from this home: ``vigil doctor``'s
checks of the real binary (its ``AgentCli``'s ``checks``: ``dispatch.agents.claude.doctor``,
``dispatch.agents.codex.doctor``), then the agent's workspace, its sandbox (a command
run through it), what a widened setting lets it reach, and how its runs are priced
(``dispatch.agents.exposure``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from dispatch.agents.exposure import price_findings, reach_findings
from dispatch.agents.registry import AGENT_CLIS
from dispatch.environment import base_env
from vigil.config import Settings
from vigil.doctor import Finding

CHECK_TIMEOUT_S = 30.0


async def run_briefly(argv: list[str], env: Mapping[str, str], cwd: Path) -> tuple[int | None, str]:
    """Run ``argv`` for a check of ``vigil doctor``: its exit code (None: it could
    not start, or gave no answer within ``CHECK_TIMEOUT_S``) and stdout+stderr."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
        )
    except OSError as err:
        return None, err.strerror or str(err)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), CHECK_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return None, f"no answer within {CHECK_TIMEOUT_S:g}s"
    return proc.returncode, out.decode("utf-8", errors="replace").strip()


async def agent_findings(settings: Settings) -> list[Finding]:
    """The checks of the configured executor's CLI, then its workspace, sandbox and
    prices; none for executors without a CLI here (their command is checked by
    ``vigil doctor`` itself)."""
    cli = AGENT_CLIS.get(settings.dispatch.executor)
    if cli is None:
        return []
    found = await cli.checks(settings, run_briefly)
    env = base_env(settings, executor=cli.facts.name)
    return found + await reach_findings(settings, env, run_briefly) + price_findings(settings, env)
