"""Whether the configured agent CLI can work from this home: ``vigil doctor``'s
checks of the real binary (``dispatch.claude_readiness``,
``dispatch.codex_readiness``), then, for either, the agent's workspace, its
sandbox (a command run through it: ``dispatch.sandbox_probe``), what a widened
setting lets it reach, and how its runs are priced (``dispatch.exposure``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from dispatch.claude_readiness import claude_findings
from dispatch.codex_readiness import codex_findings
from dispatch.environment import base_env
from dispatch.exposure import price_findings, reach_findings
from vigil.clock import MS_PER_DAY, SystemClock
from vigil.config import Settings
from vigil.doctor import Finding
from vigil.errors import VigilError
from vigil.models import CostGroup
from vigil.store.opening import open_store

CHECK_TIMEOUT_S = 30.0
RECENT_MS = 7 * MS_PER_DAY  # the runs whose models doctor looks at
NO_MODEL = "(none)"  # the roll-up's key for runs that named no model


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
    executor = settings.dispatch.executor
    if executor == "claude":
        found = await claude_findings(settings, run_briefly)
    elif executor == "codex":
        found = await codex_findings(settings, run_briefly)
    else:
        return []
    env = base_env(settings, executor=executor)
    prices = price_findings(settings, env, await recent_models(settings))
    return found + await reach_findings(settings, env, run_briefly) + prices


async def recent_models(settings: Settings) -> list[str]:
    """The models the runs of the last ``RECENT_MS`` used, by the store's cost
    roll-up; none when the database is not there yet or cannot be opened (its own
    check says why)."""
    if settings.store.url is None and not settings.store.path.exists():
        return []
    try:
        store = await open_store(settings)
    except VigilError:
        return []
    try:
        rows = await store.cost_rollup(since_ms=SystemClock().now_ms() - RECENT_MS, by=CostGroup.MODEL)
    except VigilError:
        return []
    finally:
        await store.close()
    return [row.key for row in rows if row.key != NO_MODEL]
