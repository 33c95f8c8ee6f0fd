"""``AgentCli``: one agent CLI as the dispatcher and ``vigil doctor`` use it.

Each CLI's folder (``dispatch/agents/claude/``, ``dispatch/agents/codex/``) makes
one, named in ``dispatch.agents.registry``; everything else looks a CLI up there by
its executor's name and never compares the name. The CLI's pure facts (its
settings table, credential and folder variables) are the core's
(``vigil.agent_clis``): the core reads them without importing ``dispatch``. Its
argv builder and stream parser are its executor's own. Below: what the CLIs' doctor
checks share.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dispatch.agents.pricing import TokenUsage
from dispatch.agents.probe import Target
from dispatch.environment import base_env
from dispatch.executors import Executor
from dispatch.workspace import contains
from vigil.agent_clis import CliFacts
from vigil.config import Settings
from vigil.doctor import Finding

# runs a short command for ``vigil doctor``: (argv, env, cwd) → exit code (None: it
# did not start or answer in time) and its output
Run = Callable[[list[str], Mapping[str, str], Path], Awaitable[tuple[int | None, str]]]
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


@dataclass(frozen=True)
class Started:
    """An agent CLI that answered ``--version`` (what it said) as the loop runs it:
    from ``origin``, the loop's environment, with ``env``, the agent's, in ``cwd``."""

    origin: Mapping[str, str]
    env: dict[str, str]
    cwd: Path
    command: list[str]
    version: str


async def started(
    settings: Settings, cli: CliFacts, run: Run, source: Mapping[str, str] | None, said: Callable[[str], str]
) -> Started | Finding:
    """An agent CLI's first doctor checks: the workspace exists and ``command
    --version`` runs in it as the loop runs it (``source``: the loop's environment;
    None: this one). Else a ``fail``: why (``said`` makes the output one line) and
    how to install the CLI."""
    origin = os.environ if source is None else source
    env = base_env(settings, source=origin, executor=cli.name)
    cwd = settings.dispatch.workdir or settings.home
    if not cwd.is_dir():
        return Finding("fail", "workdir", f"{cwd} does not exist: create it or change [dispatch] workdir")
    command = list(settings.agent_clis[cli.name].command)
    code, output = await run([*command, "--version"], env, cwd)
    if code != 0:
        why = said(output) or f"exit code {code}"
        fix = f"install {cli.install} or set [executors.{cli.name}] command"
        return Finding("fail", cli.name, f"{command[0]!r} does not run ({why}); {fix}")
    return Started(origin, env, cwd, command, output)


class ExecutorFactory(Protocol):
    def __call__(self, settings: Settings, *, grace_s: float, now_ms: Callable[[], int] | None) -> Executor: ...


@dataclass(frozen=True)
class AgentCli:
    """One agent CLI. ``executor`` makes its executor. For ``vigil doctor``:
    ``checks`` (its binary, login and settings, each command run by the given
    ``Run``), ``sandbox`` (whether its sandbox starts in a folder; None: nothing to
    say), ``widenings`` (each of its settings that lets the agent reach beyond its
    workspace) and ``priced_as``, its pricing source: the model its runs are priced
    as from the price table, or the finding that says why the table is not used.
    For crash recovery (``dispatch.salvage``): ``session_named``, the session a line
    of its stream names (None: the line names none), and ``session_left``, the
    tokens by model of each model call its own file of a session records from an
    epoch-ms moment on, looked up with the CLI's environment (None: no file of that
    session there). ``own_model``: the model the CLI's own configuration names
    (Codex's ``config.toml``), read with its environment; None: none. For ``vigil
    doctor --probe`` (``dispatch.agents.probe``): ``probe``, one live request for an
    account, and ``probe_tokens``, about how many input tokens it holds (said
    before it runs)."""

    facts: CliFacts
    executor: ExecutorFactory
    checks: Callable[[Settings, Run, Mapping[str, str] | None], Awaitable[list[Finding]]]
    sandbox: Callable[[Settings, Mapping[str, str], Path, Run], Awaitable[Finding | None]]
    widenings: Callable[[Settings, Mapping[str, str]], list[str]]
    priced_as: Callable[[Settings, Mapping[str, str]], str | Finding]
    session_named: Callable[[Mapping[str, Any]], str | None]
    session_left: Callable[[Mapping[str, str], str, int], dict[str, TokenUsage] | None]
    own_model: Callable[[Mapping[str, str]], str | None]
    probe: Callable[[Settings, Target], Awaitable[Finding]]
    probe_tokens: str
