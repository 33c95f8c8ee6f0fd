"""``vigil doctor``'s checks of the ``claude`` executor, run for real as the loop
would run it (the agent's environment and working directory;
``dispatch.agents.doctor`` calls them when Claude Code is the configured executor).

That the command starts (``--version``); that it is logged in (``claude auth
status`` prints JSON with ``loggedIn``); that the settings do not make it refuse to
start (``bypassPermissions`` as root); that the working directory exists; and which
secret-looking variables are set here but would not reach the agent. Each problem
says what to do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from dispatch.agents.cli import Run, started
from vigil import agent_clis
from vigil.config import Settings
from vigil.doctor import Finding
from vigil.redaction import looks_secret


def _last_line(output: str) -> str:
    return output.splitlines()[-1] if output else ""


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


async def claude_findings(settings: Settings, run: Run, source: Mapping[str, str] | None = None) -> list[Finding]:
    """The checks of the ``claude`` executor, each command run by ``run``; ``source``
    is the environment the loop would start from (None: this process's)."""
    here = await started(settings, agent_clis.CLAUDE, run, source, _last_line)
    if isinstance(here, Finding):
        return [here]
    found = [Finding("ok", "claude", here.version.splitlines()[0] if here.version else "runs")]
    _, said = await run([*here.command, "auth", "status"], here.env, here.cwd)
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
    unpassed = _unpassed_secrets(here.env, here.origin)
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
