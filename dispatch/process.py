"""Process groups of agent runs: identify them, check them, end them.

Every executor starts its child in a new session, so the child's pid is also its
process group id and everything the agent spawns stays in that group. Ending a run
means ending the whole group: SIGTERM, a grace period, then SIGKILL.

Crash recovery uses the same helpers on a group recorded by a dead dispatcher.
A pid alone can be reused by an unrelated process after a reboot or a long time,
so a recorded pid is only trusted when the process start time recorded with it
(``/proc/<pid>/stat`` field 22, clock ticks since boot, kept as text) still
matches. Zombies count as gone: they run nothing and vanish when reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")
POLL_S = 0.05  # how often a group is probed while it is asked to end
KILL_WAIT_S = 5.0  # after SIGKILL the kernel needs moments, not seconds; bound it anyway


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` from field 3 (state) on; None if unreadable.

    The command name (field 2) is in parentheses and may itself contain spaces and
    parentheses, so the fields are split after its *last* closing parenthesis.
    """
    try:
        raw = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    _, sep, rest = raw.rpartition(b")")
    if not sep:
        return None
    return rest.decode("ascii", errors="replace").split()


def process_start_time(pid: int) -> str | None:
    """The start time of ``pid`` as the OS reports it (clock ticks since boot, as text).

    None when the process does not exist or ``/proc`` is not available.
    """
    fields = _stat_fields(pid)
    # field 22 overall; ``fields`` starts at field 3
    if fields is None or len(fields) < 20:
        return None
    return fields[19]


def same_process(pid: int, proc_start: str | None) -> bool:
    """True when ``pid`` is alive (not a zombie) and is the process that was recorded.

    ``proc_start`` None means the start time could not be recorded: the process
    cannot be told apart from a reused pid, so the answer is False (never signal a
    process that may be a stranger).
    """
    if proc_start is None:
        return False
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] == "Z":
        return False
    return fields[19] == proc_start


def pid_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    fields = _stat_fields(pid)
    if fields is not None:
        return fields[0] != "Z"
    if PROC.is_dir():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_members(pgid: int) -> list[int]:
    """Pids of the live (non-zombie) processes in group ``pgid``, from ``/proc``."""
    members = []
    try:
        entries = list(PROC.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        # fields[0] is the state, fields[2] the process group (field 5 overall)
        if fields is not None and len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def group_alive(pgid: int) -> bool:
    """True while any process of group ``pgid`` runs (zombies do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False  # no process at all, zombies included: the usual answer, in one call
    except PermissionError:
        pass  # it exists, but is not ours to signal
    # Something is in the group; only /proc tells a zombie (which runs nothing) from a
    # live process. Reading every process's stat is why this is not the first check.
    return bool(group_members(pgid)) if PROC.is_dir() else True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # gone already, or (after pid reuse) not ours to signal
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _wait_gone(pgid: int, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(POLL_S)
    return True


async def end_process_group(pgid: int, grace_s: float) -> bool:
    """End every process of group ``pgid``: SIGTERM, wait up to ``grace_s`` seconds,
    then SIGKILL. Returns True when the group is gone (it may already have been).

    Safe to call on a group that has ended. Not atomic: a process the group forks
    between the probes is caught by the next signal, which goes to the whole group.
    """
    if not group_alive(pgid):
        return True
    _signal_group(pgid, signal.SIGTERM)
    if await _wait_gone(pgid, grace_s):
        return True
    _signal_group(pgid, signal.SIGKILL)
    return await _wait_gone(pgid, KILL_WAIT_S)
