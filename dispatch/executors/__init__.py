"""Executors: how one attempt at a task is carried out.

An executor is a one-method protocol that *returns* an ``Outcome``; it raises only
for the truly unexpected (the dispatcher catches that in one place and records it as
a crash). Every executor that starts a process starts it in its own process group,
reports it through ``RunContext.on_process_start`` (recorded on the run for crash
recovery), and ends the whole group on timeout or cancel.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from vigil.models import Outcome, Task

ProcessStarted = Callable[[int, int, str | None], Awaitable[None]]
"""Called with (pid, pgid, proc_start) once the executor's process exists."""


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


class Executor(Protocol):
    name: str

    async def run(self, task: Task, ctx: RunContext) -> Outcome:
        """Carry out one attempt and say what became of it."""
        ...
