"""Whether the configured agent CLI, each fallback and each account can work from
this home: ``vigil doctor``'s checks of the real binary
(``dispatch.claude_readiness``, ``dispatch.codex_readiness``), then, for either,
the agent's workspace, its sandbox (a command run through it:
``dispatch.sandbox_probe``), what a widened setting lets it reach, and how its
runs are priced (``dispatch.exposure``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from dispatch.accounts import account_env
from dispatch.claude_readiness import claude_findings
from dispatch.codex_readiness import codex_findings
from dispatch.environment import base_env
from dispatch.exposure import price_findings, reach_findings
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
    prices; then the same of each fallback (``[dispatch] fallback``), and the CLI's
    login of every further account of each, each run with that account's folder
    or key. None for executors without a CLI here (their command is checked by
    ``vigil doctor`` itself). A fallback or an account that cannot start fails
    here: at run time it would be skipped, its work waiting for a limit's reset."""
    found: list[Finding] = []
    for executor in dict.fromkeys((settings.dispatch.executor, *settings.dispatch.fallback)):
        if executor not in ("claude", "codex"):
            continue
        as_configured = replace(settings, dispatch=replace(settings.dispatch, executor=executor))
        accounts = (settings.claude if executor == "claude" else settings.codex).accounts
        fallback = "" if executor == settings.dispatch.executor else f"{executor} (fallback): "
        for n, account in enumerate(accounts or (None,)):
            origin = os.environ if account is None else account_env(os.environ, executor, account, os.environ)
            checks = await _cli_findings(as_configured, executor, origin)
            if n == 0:
                env = base_env(as_configured, source=origin, executor=executor)
                checks += await reach_findings(as_configured, env, run_briefly) + price_findings(as_configured, env)
            else:  # the workspace, sandbox and prices are the executor's: said once
                checks = [c for c in checks if c.what == "login" or c.level == "fail"]
            if account is not None and account.api_key_env and not os.environ.get(account.api_key_env):
                checks = [c for c in checks if c.what != "login"]  # its key is not here: vigil doctor warns
            whose = fallback if account is None else f"{executor}:{account.name}: "
            found += [replace(c, detail=whose + c.detail) if whose else c for c in checks]
    return found


async def _cli_findings(settings: Settings, executor: str, origin: Mapping[str, str]) -> list[Finding]:
    if executor == "claude":
        return await claude_findings(settings, run_briefly, origin)
    return await codex_findings(settings, run_briefly, origin)
