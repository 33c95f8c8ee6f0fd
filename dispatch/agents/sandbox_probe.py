"""What every agent CLI's sandbox check shares: ``vigil doctor`` runs a trivial
command through each sandbox a task would use, as the task would, so that a sandbox
that cannot start is found before a run (where every command the agent tries would
fail). Each CLI's own probe is in its folder (``dispatch.agents.claude.reach``,
``dispatch.agents.codex.reach``); the checks' is here: ``true`` through
``dispatch.checks.Sandbox``, the very command line a check gets.

Each failure is a ``fail`` finding with the sandbox's own words and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dispatch.agents.cli import Run
from dispatch.checks import check_sandbox
from dispatch.workspace import contains
from vigil.config import Settings
from vigil.doctor import Finding

USERNS_FIX = (
    "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 "
    "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap)"
)


def said(output: str) -> str:
    """What a sandbox said, one line: its lines joined, Codex's WARNING lines last."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    warnings = [line for line in lines if line.startswith("WARNING")]
    return "; ".join([line for line in lines if not line.startswith("WARNING")] + warnings)


def outside_dirs(section: str, folders: tuple[str, ...], home: Path) -> list[str]:
    """A reach line for each of ``[section] add_dirs`` that contains the home."""
    return [
        f"[{section}] add_dirs {folder!r} contains the home: the agent can write vigil.toml and the database"
        for folder in folders
        if contains((home / Path(folder).expanduser()).resolve(), home)
    ]


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
        words = said(output) or f"exit code {code}"
        return Finding(
            "fail",
            "checks",
            f"a task's checks cannot start in bubblewrap, so every check would fail ({words}): "
            f"{USERNS_FIX}, or set [dispatch] check_sandbox = false",
        )
    reach = (
        "with the host's network ([checks] network = true)"
        if network
        else "without network ([checks] network = true allows it)"
    )
    return Finding("ok", "checks", f"a task's checks run in bubblewrap, writing only the workspace, {reach}")
