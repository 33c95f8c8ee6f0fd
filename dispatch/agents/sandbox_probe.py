"""``vigil doctor`` runs a trivial command through each sandbox a task would use,
as the task would, so that a sandbox that cannot start is found before a run
(where every command the agent tries would fail):

* Codex: ``codex sandbox -c sandbox_mode=… -- true`` in the workspace, with the
  agent's environment: Codex's own Linux sandbox (its bubblewrap, then its helper
  ``codex-linux-sandbox``, which Codex 0.171.0 makes only when ``CODEX_HOME`` lies
  outside the temporary folder);
* Claude Code: Claude Code 2.1.197 has no command that runs its sandbox alone, so
  the probe starts the ``bwrap`` on the agent's ``PATH`` with the namespaces and
  mounts Claude Code gives every Bash command (a new session, no network, a new
  process namespace, the tree read-only but the workspace) and runs ``socat``, its
  network bridge, inside; what bubblewrap says is what the agent's Bash calls
  would have said;
* the checks: ``true`` through ``dispatch.checks.Sandbox``, the very command line a
  check gets.

Each failure is a ``fail`` finding with the sandbox's own words and the fix.
"""

from __future__ import annotations

import platform
import shutil
from collections.abc import Mapping
from pathlib import Path

from dispatch.agents.codex.doctor import Run
from dispatch.agents.codex.executor import NO_LOGIN_SHELL, WORKSPACE_NETWORK
from dispatch.checks import check_sandbox
from vigil.config import Settings
from vigil.doctor import Finding

CODEX_HELPER = "codex-linux-sandbox"
USERNS_FIX = (
    "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 "
    "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap)"
)


def _said(output: str) -> str:
    """What a sandbox said, one line: its lines joined, Codex's WARNING lines last."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    warnings = [line for line in lines if line.startswith("WARNING")]
    return "; ".join([line for line in lines if not line.startswith("WARNING")] + warnings)


def claude_probe_argv(bwrap: str, cwd: Path) -> list[str]:
    """The bubblewrap command line of the probe: Claude Code's namespaces and
    mounts for a Bash command in ``cwd`` (its temporary folders and the files it
    hides left out), running its network bridge, ``socat``."""
    return [
        bwrap, "--new-session", "--die-with-parent", "--unshare-net",
        "--ro-bind", "/", "/", "--bind", str(cwd), str(cwd),
        "--dev", "/dev", "--unshare-pid", "--proc", "/proc",
        "--", "socat", "-V",
    ]  # fmt: skip


async def claude_sandbox_problem(bwrap: str, env: Mapping[str, str], cwd: Path, run: Run) -> str | None:
    """What bubblewrap says when Claude Code's sandbox cannot start here; None
    when it starts (or on a system without bubblewrap: macOS)."""
    if platform.system() != "Linux":
        return None
    code, output = await run(claude_probe_argv(bwrap, cwd), env, cwd)
    if code == 0:
        return None
    return _said(output) or f"bwrap exited with code {code}"


async def codex_sandbox_problem(settings: Settings, env: Mapping[str, str], cwd: Path, run: Run) -> Finding | None:
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
    said = _said(output) or f"exit code {code}"
    if CODEX_HELPER in output:
        fix = (
            f"Codex makes its helper {CODEX_HELPER} only when CODEX_HOME is outside the temporary folder "
            "($TMPDIR, else /tmp): move CODEX_HOME (e.g. to ~/.codex) or point TMPDIR elsewhere"
        )
    else:
        fix = f"{USERNS_FIX}, or set [executors.codex] sandbox"
    return Finding(
        "fail", "sandbox", f"codex: its sandbox cannot start a command, so every command would fail ({said}): {fix}"
    )


async def checks_sandbox_finding(settings: Settings, env: Mapping[str, str], cwd: Path, run: Run) -> Finding:
    """Where a task's checks run (docs/coding.md, *Checks*): in bubblewrap when it
    is installed, with or without network; ``true`` is run through that sandbox to
    show that it starts."""
    network = settings.checks.network
    sandbox = check_sandbox(env, (), network=network)
    if sandbox is None:
        return Finding(
            "warn",
            "checks",
            "bwrap not found: a task's checks (code the agent wrote) run unconfined, able to write the home; "
            "install bubblewrap (e.g. apt install bubblewrap)",
        )
    code, output = await run(sandbox.wrap(("true",), cwd), env, cwd)
    if code != 0:
        said = _said(output) or f"exit code {code}"
        return Finding(
            "fail",
            "checks",
            f"a task's checks cannot start in bubblewrap, so every check would fail ({said}): "
            f"{USERNS_FIX}, or set [dispatch] check_sandbox = false",
        )
    reach = (
        "with the host's network ([checks] network = true)"
        if network
        else "without network ([checks] network = true allows it)"
    )
    return Finding("ok", "checks", f"a task's checks run in bubblewrap, writing only the workspace, {reach}")
