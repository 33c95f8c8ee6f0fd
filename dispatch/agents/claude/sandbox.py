"""Claude Code's OS sandbox for Bash, as Vigil turns it on for the agent.

Claude Code 2.1.197 can run every Bash command in an OS sandbox: bubblewrap
(``bwrap``) with ``socat`` for its network proxy on Linux, Seatbelt on macOS. Inside
it a command may write only the working directory (the agent's workspace) and the
CLI's own temporary folder; the home, its ``vigil.toml``, identity file, skills and
database are read-only. With ``[executors.claude] bash_sandbox`` on (the default)
and the sandbox available, Vigil passes these settings, so that Bash is allowed
without asking (a coding agent must run the project's tests), can never leave the
sandbox (``allowUnsandboxedCommands`` off), and a sandbox that is unavailable makes
the CLI refuse the run rather than run Bash unconfined (``failIfUnavailable``); one
whose bubblewrap fails to start a command fails that command (the run is then
``sandbox_failed``: ``dispatch.executors.refusals``), and ``vigil doctor`` starts one
the same way first (``dispatch.agents.doctor``). The
store's URL, when the loop uses PostgreSQL, is unset for sandboxed commands: only
Vigil's MCP server needs it.

Where the sandbox cannot run, Bash is limited to ``[executors.claude]
allowed_tools`` (Claude Code refuses anything else in print mode) and ``vigil
doctor`` says what to install.
"""

from __future__ import annotations

import platform
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vigil.config import STORE_URL_ENV

LINUX_TOOLS = ("bwrap", "socat")
INSTALL_HINT = "install bubblewrap and socat (e.g. apt install bubblewrap socat)"


def sandbox_problem(env: Mapping[str, str]) -> str | None:
    """Why Claude Code's sandbox cannot run here for a CLI with environment ``env``
    (its ``PATH`` is searched); None when it can."""
    system = platform.system()
    if system == "Darwin":
        return None  # Seatbelt is part of macOS
    if system != "Linux":
        return f"Claude Code's sandbox does not run on {system}"
    missing = [tool for tool in LINUX_TOOLS if shutil.which(tool, path=env.get("PATH")) is None]
    if missing:
        return f"{' and '.join(missing)} not found: {INSTALL_HINT}"
    return None


def sandbox_settings(env: Mapping[str, str], allow_write: Sequence[Path] = ()) -> dict[str, Any]:
    """The ``--settings`` object that turns the sandbox on for one run.
    ``allow_write``: folders besides the workspace that commands may write (a
    task's clone's own git folder, which lies inside the workspace anyway)."""
    sandbox: dict[str, Any] = {
        "enabled": True,
        "autoAllowBashIfSandboxed": True,
        "allowUnsandboxedCommands": False,
        "failIfUnavailable": True,
    }
    if allow_write:
        sandbox["filesystem"] = {"allowWrite": [str(folder) for folder in allow_write]}
    if env.get(STORE_URL_ENV):
        sandbox["credentials"] = {"envVars": [{"name": STORE_URL_ENV, "mode": "deny"}]}
    return {"sandbox": sandbox}
