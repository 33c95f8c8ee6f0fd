"""The child process of one run: start it, stream its stdout, bound it, end it.

Shared by every executor that runs a program. The child gets an argv list (never a
shell string), an explicit environment, its input on stdin, and a new session (so
its pid is its process group id). Its stdout is read in chunks and split into lines
here, so a 10 MB line costs memory but never hits a ``StreamReader`` line limit;
bytes that are not UTF-8 are passed on as they are (callers decode with
``errors="replace"``).

The program starts only once its process is recorded (``on_start``: its pid and
group, committed): it is spawned as ``/bin/sh`` running a fixed script that waits
for one line on stdin and then ``exec``s the argv in its place (same pid, same
group), and that line is written after the commit, ahead of the program's input.
A dispatcher that dies in between closes the pipe by dying, so the program never
starts and crash recovery never meets an agent it cannot find and end. The argv
reaches the program as the script's positional parameters, never as shell text.

The whole group is ended (SIGTERM, grace, SIGKILL) when the timeout passes, when
the program prints nothing on stdout for ``stall_s`` (it stalled: a model that
went silent, a hung tool), when the awaiting task is cancelled (then ``CancelledError`` is re-raised after the
group is gone), and after a normal exit too, so nothing the agent left running in
the background outlives its run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dispatch.executors import ProcessStarted
from dispatch.executors.answer import summary_of
from dispatch.process import end_process_group, process_start_time
from vigil.durations import format_duration
from vigil.models import Outcome, OutcomeKind

CHUNK_BYTES = 256 * 1024
STDERR_KEEP_BYTES = 64 * 1024  # the tail of stderr kept for error messages
EXIT_POLL_S = 0.1
DRAIN_S = 2.0  # after the child exits, how long its pipes may stay open (held by its own children)
# The child is a shell that waits for the go line before it becomes the program, so
# the run's pid is recorded before the program can do anything.
START_SHELL = "/bin/sh"
# Reads the go line (the shell's read takes one byte at a time from a pipe, so the
# program's input is left whole); at end of input, the dispatcher having died
# before the go, exits without running anything. `exec "$@"`: the argv as given,
# found on the child's PATH.
GO_SCRIPT = 'read -r _ || exit 125; exec "$@"'
GO = b"\n"

LineHandler = Callable[[bytes], None]


class _Stalled(Exception):
    """Nothing came on stdout for the stall timeout."""


class _Silence:
    """Passes stdout lines on, noting when the last one came; ``watch`` raises
    ``_Stalled`` once none has come for ``stall_s`` seconds (None: never)."""

    def __init__(self, on_line: LineHandler, stall_s: float | None) -> None:
        self._on_line = on_line
        self._stall_s = stall_s
        self._heard = time.monotonic()

    def began(self) -> None:
        self._heard = time.monotonic()

    def line(self, raw: bytes) -> None:
        self._heard = time.monotonic()
        self._on_line(raw)

    def watch(self) -> None:
        if self._stall_s is not None and time.monotonic() - self._heard >= self._stall_s:
            raise _Stalled


class StopRun(Exception):
    """Raised by a line handler when the run cannot come to any good (the CLI goes
    on retrying a refused key): the process group is ended at once and the result
    says ``stopped``."""


@dataclass(frozen=True)
class ChildResult:
    """How the child ended. ``exit_code`` is None when it was never started
    (``spawn_error`` says why); a negative code is the signal that ended it."""

    exit_code: int | None
    timed_out: bool
    stderr: str
    spawn_error: str | None = None
    pid: int | None = None
    stopped: bool = False  # a line handler raised StopRun
    stalled: bool = False  # nothing on stdout for the stall timeout


async def _read_lines(stream: asyncio.StreamReader, on_line: LineHandler) -> None:
    # a bytearray grows in place: a 10 MB line costs one buffer, not 40 copies of it
    pending = bytearray()
    while chunk := await stream.read(CHUNK_BYTES):
        pending += chunk
        if b"\n" not in chunk:
            continue
        *lines, rest = bytes(pending).split(b"\n")
        pending = bytearray(rest)
        for line in lines:
            on_line(line.rstrip(b"\r"))
    if pending:
        on_line(bytes(pending).rstrip(b"\r"))


async def _read_tail(stream: asyncio.StreamReader, keep: bytearray) -> None:
    while chunk := await stream.read(CHUNK_BYTES):
        keep += chunk
        if len(keep) > STDERR_KEEP_BYTES:
            del keep[: len(keep) - STDERR_KEEP_BYTES]


async def _feed(stream: asyncio.StreamWriter, data: bytes) -> None:
    # the child may exit without reading its input; that is its business
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stream.write(data)
        await stream.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stream.close()
        await stream.wait_closed()


async def _finish(tasks: Sequence[asyncio.Task[None]], wait_s: float) -> None:
    """Give the pipe tasks ``wait_s`` seconds to reach EOF, then cancel the rest."""
    if tasks:
        _, stuck = await asyncio.wait(tasks, timeout=wait_s)
        for task in stuck:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _end_group(pgid: int, grace_s: float) -> None:
    """``end_process_group`` that completes even if the caller is cancelled meanwhile
    (the cancellation is re-raised once the group is gone)."""
    ending = asyncio.ensure_future(end_process_group(pgid, grace_s))
    try:
        await asyncio.shield(ending)
    except asyncio.CancelledError:
        await ending
        raise


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Collect an ended child's exit status, so its transport is closed and not left
    for the garbage collector (which warns about a "still running" subprocess)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), DRAIN_S)


async def _ended(
    proc: asyncio.subprocess.Process, readers: Sequence[asyncio.Task[None]], watch: Callable[[], None]
) -> None:
    """Return once the child has exited and its output is read, or once it has
    exited and its pipes stayed open ``DRAIN_S`` longer (held by processes it left
    running, which the caller then ends). ``watch`` is called every poll while the
    child runs, and may raise to end it (a stall)."""
    # Process.wait() on Python 3.11 also waits for the pipes to close, so a
    # background grandchild holding stdout would hide the child's exit from it
    while proc.returncode is None and not all(reader.done() for reader in readers):
        await asyncio.wait(readers, timeout=EXIT_POLL_S)
        for reader in readers:
            if reader.done() and not reader.cancelled() and reader.exception() is not None:
                # our side failed (say the transcript's disk is full): stop the run
                raise reader.exception()  # type: ignore[misc]
        watch()
    if proc.returncode is None:
        exited = asyncio.ensure_future(proc.wait())
        try:
            while not exited.done():
                await asyncio.wait({exited}, timeout=EXIT_POLL_S)
                if not exited.done():
                    watch()
        finally:
            exited.cancel()
    else:
        await asyncio.wait(readers, timeout=DRAIN_S)


def _program_problem(program: str, env: Mapping[str, str], cwd: Path) -> str | None:
    if not cwd.is_dir():
        return f"cannot start {program!r} in {cwd}: no such folder (check the working directory)"
    return _no_program(program, env, cwd)


def _no_program(program: str, env: Mapping[str, str], cwd: Path) -> str | None:
    """Why ``program`` cannot be started, found before the spawn (behind the start
    shell it would only be said on the shell's stderr); None when it can be."""
    if "/" in program:
        path = cwd / program
        found = path.is_file() and os.access(path, os.X_OK)
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath)) is not None
    return None if found else f"cannot start {program!r}: no such executable file"


async def run_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    stdin: bytes,
    timeout_s: float,
    grace_s: float,
    on_start: ProcessStarted,
    on_line: LineHandler,
    stall_s: float | None = None,
) -> ChildResult:
    """Run ``argv`` to its end, or until ``timeout_s`` seconds pass, or until it
    prints nothing on stdout for ``stall_s`` seconds (None: no such bound); every
    stdout line goes to ``on_line`` as it arrives. ``on_start(pid, pgid,
    proc_start)`` is awaited right after the spawn, and the program starts only
    once it has returned. Raises ``CancelledError`` (after ending the group) when
    cancelled; a program that cannot be started is reported in ``spawn_error``.
    """
    problem = _program_problem(argv[0], env, cwd)
    if problem is not None:
        return ChildResult(None, False, "", spawn_error=problem)
    try:
        proc = await asyncio.create_subprocess_exec(
            START_SHELL,
            "-c",
            GO_SCRIPT,
            "vigil-run",  # the script's $0
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as err:
        return ChildResult(None, False, "", spawn_error=f"cannot start {argv[0]!r}: {err.strerror or err}")

    pgid = proc.pid  # a new session makes the child its own group leader
    # all three are pipes, as asked for above
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    stderr_tail = bytearray()
    silence = _Silence(on_line, stall_s)
    pipes = [
        asyncio.create_task(_read_lines(proc.stdout, silence.line)),
        asyncio.create_task(_read_tail(proc.stderr, stderr_tail)),
    ]
    timed_out = stopped = stalled = False
    try:
        try:
            await on_start(proc.pid, pgid, process_start_time(proc.pid))
        except BaseException:
            proc.stdin.close()  # no go: the start shell ends without starting the program
            raise
        pipes.append(asyncio.create_task(_feed(proc.stdin, GO + stdin)))
        silence.began()  # the program starts now, not at the spawn
        async with asyncio.timeout(timeout_s):
            await _ended(proc, pipes[:2], silence.watch)
    except TimeoutError:
        timed_out = True
    except StopRun:
        stopped = True
    except _Stalled:
        stalled = True
    except BaseException:
        # cancelled, or on_start or a line handler failed: the group must be gone
        # before we let go
        try:
            await _end_group(pgid, grace_s)
        finally:  # also after a second cancel, which _end_group re-raises once the group is gone
            await _finish(pipes, 0)
            await _reap(proc)
        raise
    await _end_group(pgid, grace_s)
    await _finish(pipes, DRAIN_S)
    failure = pipes[0].exception() if pipes[0].done() and not pipes[0].cancelled() else None
    if failure is not None and not isinstance(failure, StopRun):
        raise failure
    exit_code = proc.returncode if proc.returncode is not None else await proc.wait()
    stderr = stderr_tail.decode("utf-8", errors="replace")
    return ChildResult(exit_code, timed_out, stderr, pid=proc.pid, stopped=stopped, stalled=stalled)


def ended_early(
    result: ChildResult, timeout_s: float, transcript_path: str, stall_s: float | None = None
) -> Outcome | None:
    """The outcome when the process never ran, or was ended by our timeout or for
    a stall (it printed nothing for ``stall_s``)."""
    if result.spawn_error is not None:
        # every task would fail alike: the loop is gated until a person fixes it
        return Outcome(
            kind=OutcomeKind.REFUSED,
            summary=summary_of(result.spawn_error),
            error=result.spawn_error + " (check the executor's command in vigil.toml)",
            transcript_path=transcript_path,
        )
    if result.stalled:
        silent = format_duration(int((stall_s or 0) * 1000))
        message = f"stalled: the agent printed nothing for {silent}; its process group was ended"
        return Outcome(
            kind=OutcomeKind.STALLED,
            summary=message,
            error=message,
            exit_code=result.exit_code,
            transcript_path=transcript_path,
        )
    if result.timed_out:
        message = f"timed out after {timeout_s:g}s; the agent's process group was ended"
        return Outcome(
            kind=OutcomeKind.TIMEOUT,
            summary=message,
            error=message,
            exit_code=result.exit_code,
            transcript_path=transcript_path,
        )
    return None
