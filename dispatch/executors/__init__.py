"""Executors: how one attempt at a task is carried out.

An executor is a one-method protocol that *returns* an ``Outcome``; it raises only
for the truly unexpected (the dispatcher catches that in one place and records it as
a crash). Every executor that starts a process starts it in its own process group,
reports it through ``RunContext.on_process_start`` (recorded on the run for crash
recovery), and ends the whole group on timeout or cancel.

``build_executor(name, settings)`` makes the configured one: ``claude``, ``codex``,
``command`` or ``dry-run``. ``FakeExecutor`` (``dispatch.executors.fake``) is for tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from dispatch.meter import Meter
from vigil.clock import Clock
from vigil.config import Settings
from vigil.errors import ConfigError
from vigil.models import Outcome, Task
from vigil.redaction import NO_SECRETS, Redactor

DEFAULT_GRACE_S = 5.0  # SIGTERM → SIGKILL, for an agent to save its work and exit

ProcessStarted = Callable[[int, int, str | None], Awaitable[None]]
"""Called with (pid, pgid, proc_start) once the executor's process exists."""

ProgressNoted = Callable[[str | None], None]
"""Called with a short live note about the run while it goes on (the CLI's own
retries: "API retry 3/10, next in 9 s"); None clears it."""


def _no_progress(note: str | None) -> None:
    """The default: progress notes go nowhere."""


@dataclass(frozen=True, slots=True)
class Resume:
    """Continue the agent session ``session_id`` (Claude Code's session, Codex's
    thread) of run ``from_run`` with ``message`` as its new prompt."""

    session_id: str
    message: str
    from_run: int


@dataclass(frozen=True)
class RunContext:
    """Everything an executor needs besides the task. Times in seconds where named ``_s``."""

    home: Path
    run_id: int
    attempt: int
    prompt: str
    timeout_s: float
    transcript_path: Path  # where to write the full transcript (logs/runs/<task>-<attempt>.jsonl)
    env: Mapping[str, str]  # the complete, explicit environment for the child process
    model: str | None
    command: tuple[str, ...] | None  # argv of a `command` skill, else None
    on_process_start: ProcessStarted
    redactor: Redactor = NO_SECRETS  # secrets to mask in the transcript (none by default)
    on_progress: ProgressNoted = _no_progress
    workdir: Path | None = None  # the agent's workspace (dispatch.workspace); None only in tests: the home
    # argv of Vigil's MCP server bound to this run (``vigil mcp --run N``), which the
    # agent CLI starts to give the agent its task's tools; empty: no such channel
    mcp_command: tuple[str, ...] = ()
    # the run's usage as its stream reports it, and what it may spend (dispatch.meter)
    meter: Meter = field(default_factory=Meter)
    stall_timeout_s: float | None = None  # no output for this long ends the run as stalled; None: never
    account: str | None = None  # the agent CLI's account it runs on (its variables are in ``env``)
    # folders besides the workspace the agent's sandbox must let it write: a clone's
    # own git folder, which Codex keeps read-only in a workspace (``vigil.clones``)
    writable_dirs: tuple[Path, ...] = ()
    # the operator's repository of a repository task, which no sandbox may let the
    # agent write (Codex's ``/tmp`` is taken away when it lies there); None: none
    repo: Path | None = None
    # resume an earlier run's agent session (``dispatch.resumption``); None: a fresh
    # session given ``prompt``. An executor that cannot resume it says so on its
    # outcome (``resume_refused``) and the dispatcher runs the attempt afresh.
    resume: Resume | None = None
    keep_transcript: bool = False  # append to the transcript (a fresh try after a refused resume)

    @property
    def cwd(self) -> Path:
        """Where the agent's process runs: ``workdir``, else the home."""
        return self.workdir if self.workdir is not None else self.home


class Executor(Protocol):
    name: str

    async def run(self, task: Task, ctx: RunContext) -> Outcome:
        """Carry out one attempt and say what became of it."""
        ...


def build_executor(
    name: str, settings: Settings, *, grace_s: float | None = None, clock: Clock | None = None
) -> Executor:
    """The executor called ``name``; raises ``ConfigError`` for an unknown name.

    ``grace_s`` is how long a process group gets between SIGTERM and SIGKILL
    (default ``DEFAULT_GRACE_S``). ``clock`` (None: the system clock) dates the
    reset of a usage limit the agent names as a time of day.
    """
    # imported here: each executor module imports this one for RunContext
    from dispatch.agents.registry import AGENT_CLIS
    from dispatch.executors.command import CommandExecutor
    from dispatch.executors.dryrun import DryRunExecutor

    if name == "dry-run":
        return DryRunExecutor()
    grace = DEFAULT_GRACE_S if grace_s is None else grace_s
    now_ms = None if clock is None else clock.now_ms
    if name in AGENT_CLIS:
        return AGENT_CLIS[name].executor(settings, grace_s=grace, now_ms=now_ms)
    if name == "command":
        return CommandExecutor(grace_s=grace)
    raise ConfigError(f"unknown executor {name!r}: expected {', '.join(AGENT_CLIS)}, command or dry-run")
