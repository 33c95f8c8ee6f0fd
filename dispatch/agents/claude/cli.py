"""Claude Code as an ``AgentCli`` (``dispatch.agents.registry``): its executor, doctor
checks, pricing, what its settings let the agent reach and whether its sandbox
starts (its part of ``vigil doctor``'s reach lines, ``dispatch.agents.doctor``).

Claude Code 2.1.197 has no command that runs its sandbox alone, so the probe starts
the ``bwrap`` on the agent's ``PATH`` with the namespaces and mounts Claude Code
gives every Bash command (a new session, no network, a new process namespace, the
tree read-only but the workspace) and runs ``socat``, its network bridge, inside;
what bubblewrap says is what the agent's Bash calls would have said.
"""

from __future__ import annotations

import platform
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dispatch.agents.claude import probe
from dispatch.agents.claude.doctor import claude_findings
from dispatch.agents.claude.executor import ClaudeExecutor
from dispatch.agents.claude.sandbox import sandbox_problem
from dispatch.agents.claude.session import session_path, session_usage
from dispatch.agents.cli import USERNS_FIX, AgentCli, Run, outside_dirs, said
from dispatch.agents.pricing import TokenUsage
from vigil import agent_clis
from vigil.config import Settings
from vigil.doctor import Finding

UNCONFINED_BASH = ("Bash", "Bash(*)", "Bash(*:*)")


def widenings(settings: Settings, env: Mapping[str, str]) -> list[str]:
    """Each ``[executors.claude]`` setting that lets the agent reach beyond its
    workspace (whether the sandbox can run depends on ``env``'s PATH)."""
    cli = settings.claude
    found = []
    if cli.permission_mode == "bypassPermissions":
        found.append("Claude Code runs with bypassPermissions: the agent can edit any file, the home's included")
    unsandboxed = not cli.bash_sandbox or sandbox_problem(env) is not None
    if unsandboxed and any(rule in UNCONFINED_BASH for rule in cli.allowed_tools):
        found.append("Bash is allowed without Claude Code's sandbox: its commands can write the home")
    return found + outside_dirs("executors.claude", cli.add_dirs, settings.home)


def probe_argv(bwrap: str, cwd: Path) -> list[str]:
    """The bubblewrap command line of the probe: Claude Code's namespaces and
    mounts for a Bash command in ``cwd`` (its temporary folders and the files it
    hides left out), running its network bridge, ``socat``."""
    return [
        bwrap, "--new-session", "--die-with-parent", "--unshare-net",
        "--ro-bind", "/", "/", "--bind", str(cwd), str(cwd),
        "--dev", "/dev", "--unshare-pid", "--proc", "/proc",
        "--", "socat", "-V",
    ]  # fmt: skip


async def bwrap_problem(bwrap: str, env: Mapping[str, str], cwd: Path, run: Run) -> str | None:
    """What bubblewrap says when Claude Code's sandbox cannot start here; None
    when it starts (or on a system without bubblewrap: macOS)."""
    if platform.system() != "Linux":
        return None
    code, output = await run(probe_argv(bwrap, cwd), env, cwd)
    if code == 0:
        return None
    return said(output) or f"bwrap exited with code {code}"


async def sandbox_finding(settings: Settings, env: Mapping[str, str], cwd: Path, run: Run) -> Finding:
    """Whether Bash runs in Claude Code's OS sandbox in ``cwd``, as a task's would."""
    cli = settings.claude
    if not cli.bash_sandbox:
        return Finding(
            "warn",
            "sandbox",
            "claude: bash_sandbox is off: Bash runs only what [executors.claude] allowed_tools allows, unconfined",
        )
    missing = sandbox_problem(env)
    if missing is not None:
        return Finding(
            "warn",
            "sandbox",
            f"claude: the OS sandbox for Bash cannot run ({missing}); until it can, Bash runs only what "
            "[executors.claude] allowed_tools allows, so the agent cannot run a project's tests",
        )
    bwrap = shutil.which("bwrap", path=env.get("PATH"))
    failed = None if bwrap is None else await bwrap_problem(bwrap, env, cwd, run)
    if failed is not None:
        # bwrap and socat are there, so the sandbox is on: every Bash command would fail
        return Finding(
            "fail",
            "sandbox",
            f"claude: the OS sandbox for Bash does not start, so every Bash command would fail ({failed}): "
            f"{USERNS_FIX}, or set [executors.claude] bash_sandbox = false",
        )
    return Finding("ok", "sandbox", "claude: Bash runs in Claude Code's OS sandbox, writing only in the workspace")


def priced_as(settings: Settings, env: Mapping[str, str]) -> Finding:
    """Its own figure: the budget counts it; the table only gives ``api_cost_usd``."""
    return Finding("ok", "prices", "claude: each run is priced by Claude Code's own total_cost_usd")


def session_named(record: Mapping[str, Any]) -> str | None:
    """The session Claude Code's ``init`` line names."""
    value = record.get("session_id") if record.get("type") == "system" and record.get("subtype") == "init" else None
    return value if isinstance(value, str) and value else None


def session_left(env: Mapping[str, str], session: str, since_ms: int) -> dict[str, TokenUsage] | None:
    found = session_path(env, session)
    return None if found is None else session_usage(found, since_ms)


CLAUDE = AgentCli(
    agent_clis.CLAUDE,
    executor=ClaudeExecutor,
    checks=claude_findings,
    sandbox=sandbox_finding,
    widenings=widenings,
    priced_as=priced_as,
    session_named=session_named,
    session_left=session_left,
    own_model=lambda env: None,  # Claude Code's settings name none Vigil reads
    probe=probe.probe,
    probe_tokens=probe.INPUT_TOKENS,
)
