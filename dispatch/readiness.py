"""Whether the configured agent CLI can work from this home: ``vigil doctor``'s
checks of the real binary, run as the loop would run it (the agent's environment
and working directory).

For Claude Code: that the command starts (``--version``); that it is logged in
(``claude auth status`` prints JSON with ``loggedIn``); that the settings do not
make it refuse to start (``bypassPermissions`` as root); that the working directory
exists; and which secret-looking variables are set here but would not reach the
agent. Each problem says what to do. Codex's checks are in
``dispatch.codex_readiness``. For either: the agent's workspace, its sandbox, what
a widened setting lets it reach, and how its runs are priced (``dispatch.exposure``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from pathlib import Path

from dispatch.codex_readiness import codex_findings
from dispatch.environment import base_env
from dispatch.exposure import price_findings, reach_findings
from vigil.config import Settings
from vigil.doctor import Finding
from vigil.redaction import looks_secret

CHECK_TIMEOUT_S = 30.0


async def _run(argv: list[str], env: Mapping[str, str], cwd: Path) -> tuple[int | None, str]:
    """Exit code (None: could not start or timed out) and stdout+stderr."""
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


def _unpassed_secrets(env: Mapping[str, str], source: Mapping[str, str]) -> list[str]:
    return sorted(name for name in source if looks_secret(name) and name not in env)


def _claude_settings(settings: Settings) -> list[Finding]:
    cli = settings.claude
    found = []
    if cli.permission_mode == "bypassPermissions" and os.geteuid() == 0:
        found.append(
            Finding(
                "fail",
                "claude",
                "permission_mode bypassPermissions is refused as root; use acceptEdits (the default), "
                "or run vigil as another user",
            )
        )
    return found


async def claude_findings(settings: Settings, source: Mapping[str, str] | None = None) -> list[Finding]:
    """The checks of the ``claude`` executor; ``source`` is the environment the loop
    would start from (None: this process's)."""
    origin = os.environ if source is None else source
    env = base_env(settings, source=origin, executor="claude")
    cwd = settings.dispatch.workdir or settings.home
    if not cwd.is_dir():
        return [Finding("fail", "workdir", f"{cwd} does not exist: create it or change [dispatch] workdir")]
    command = list(settings.claude.command)
    code, said = await _run([*command, "--version"], env, cwd)
    if code != 0:
        why = said.splitlines()[-1] if said else f"exit code {code}"
        return [
            Finding(
                "fail",
                "claude",
                f"{command[0]!r} does not run ({why}); install Claude Code "
                "(npm install -g @anthropic-ai/claude-code) or set [executors.claude] command",
            )
        ]
    found = [Finding("ok", "claude", said.splitlines()[0] if said else "runs")]
    code, said = await _run([*command, "auth", "status"], env, cwd)
    try:
        status = json.loads(said)
    except ValueError:
        status = None
    if not isinstance(status, dict):
        found.append(Finding("warn", "login", f"`claude auth status` said no JSON: {said[:200]!r}"))
    elif status.get("loggedIn") is True:
        how = ", ".join(str(status[k]) for k in ("authMethod", "apiProvider", "apiKeySource") if status.get(k))
        found.append(Finding("ok", "login", f"logged in ({how})"))
    else:
        found.append(
            Finding(
                "fail",
                "login",
                "Claude Code is not logged in for the agent: run `claude auth login` as the user that runs "
                "vigil, or export ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN) before `vigil run`",
            )
        )
    found += _claude_settings(settings)
    unpassed = _unpassed_secrets(env, origin)
    if unpassed:
        found.append(
            Finding(
                "warn",
                "env",
                f"set here but not given to the agent: {', '.join(unpassed)} "
                "(add to [dispatch] pass_env if the agent needs them)",
            )
        )
    return found


async def agent_findings(settings: Settings) -> list[Finding]:
    """The checks of the configured executor's CLI, then its workspace, sandbox and
    prices; none for executors without a CLI here (their command is checked by
    ``vigil doctor`` itself)."""
    executor = settings.dispatch.executor
    if executor == "claude":
        found = await claude_findings(settings)
    elif executor == "codex":
        found = await codex_findings(settings, _run)
    else:
        return []
    env = base_env(settings, executor=executor)
    return found + await reach_findings(settings, env) + price_findings(settings, env)
