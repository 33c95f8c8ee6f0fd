"""Ending a sensor's child process (and its whole process group) for sure."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

DRAIN_TIMEOUT_S = 5.0


async def kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the process group ``proc`` leads (started with ``start_new_session``),
    then read its pipes to the end so the process can be reaped: asyncio only reports
    the exit once the pipes are closed, and a paused, full pipe never closes."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    # A grandchild that left the group could hold a pipe open forever: bounded wait.
    with contextlib.suppress(TimeoutError, ValueError, OSError):
        await asyncio.wait_for(proc.communicate(), DRAIN_TIMEOUT_S)
