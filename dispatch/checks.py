"""Running a task's checks: the commands that must pass before it is done.

Each check is an argv (never a shell string) run in the agent's workspace with the
agent's own environment (``dispatch.environment``: the same few variables, the
run's ids), in a new session of its own, its stdin empty, its stdout and stderr
read together and the tail kept. A check runs code the agent wrote (the tests it
changed, a Makefile), so it runs in a sandbox of its own (``Sandbox``: bubblewrap,
the whole tree read-only but the workspace, the worktree's git folders and a
private ``/tmp``; no network unless ``[checks] network`` is on), unless
``[dispatch] check_sandbox`` is off or bubblewrap is missing (``vigil doctor``
says so). The check reads what the agent could read (both CLIs' sandboxes leave
the whole tree readable), and only the end of its output reaches the next prompt
(``OUTPUT_TAIL_CHARS``). Its process is recorded on the run, as the
agent's was, so crash recovery ends it if the dispatcher dies meanwhile. A check
that outlives its timeout (its own, else the task's) is ended with its whole
process group (SIGTERM, then SIGKILL), like the agent; so is anything a check
leaves running once it exits. Every check runs, in order, even after one failed:
the next attempt's agent learns about all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dispatch.executors import ProcessStarted
from dispatch.process import end_process_group, process_start_time
from vigil.codework import OUTPUT_TAIL_CHARS, Check, CheckResult

READ_BYTES = 64 * 1024
KEEP_BYTES = 4 * OUTPUT_TAIL_CHARS  # read back from the end: UTF-8 is at most 4 bytes a character


PRIVATE_TMP = Path("/tmp")  # noqa: S108 -- replaced in the sandbox by a tmpfs of its own


@dataclass(frozen=True)
class Sandbox:
    """Where a sandboxed check may write: the workspace and ``writable`` (the
    worktree's git folders), and a ``/tmp`` of its own; everything else is
    read-only. ``bwrap`` is the bubblewrap program; ``path`` the checks' ``PATH``,
    where a program named without a folder is looked up (None: it is not).
    ``network`` False: a network namespace of its own, with only its own loopback
    (a check cannot reach the host's servers, local ones included)."""

    bwrap: str
    writable: tuple[Path, ...] = ()
    path: str | None = None
    network: bool = False

    def wrap(self, argv: Sequence[str], cwd: Path) -> list[str]:
        """``argv`` run by bubblewrap: a new process namespace (it dies with its
        parent), ``/tmp`` first replaced, then the program's installation bound back
        read-only when it lies in the host's ``/tmp``, then the folders it may
        write. Without ``network``, a network namespace of its own."""
        binds = [arg for folder in (cwd, *self.writable) for arg in ("--bind", str(folder), str(folder))]
        prefix = self._program_prefix_in_tmp(argv[0])
        kept = [] if prefix is None else ["--ro-bind", str(prefix), str(prefix)]
        return [
            self.bwrap,
            "--die-with-parent",
            "--unshare-pid",
            *(() if self.network else ("--unshare-net",)),
            "--ro-bind", "/", "/",
            "--dev", "/dev",
            "--proc", "/proc",
            "--tmpfs", str(PRIVATE_TMP),
            *kept,
            *binds,
            "--chdir", str(cwd),
            "--",
            *argv,
        ]  # fmt: skip

    def _program_prefix_in_tmp(self, program: str) -> Path | None:
        """The folder above the program's ``bin`` (a virtualenv, a toolchain) when it
        lies inside the host's ``/tmp``, which the private ``/tmp`` would hide (a
        project cloned and installed there); None elsewhere, or for a program in
        ``/tmp`` itself (binding that back would undo the private ``/tmp``)."""
        if os.path.isabs(program):
            found: str | None = program
        else:
            found = None if self.path is None else shutil.which(program, path=self.path)
        if found is None:
            return None
        prefix = Path(os.path.abspath(found)).parent.parent
        return prefix if prefix.is_relative_to(PRIVATE_TMP) and prefix != PRIVATE_TMP else None


def check_sandbox(env: Mapping[str, str], writable: Sequence[Path], *, network: bool = False) -> Sandbox | None:
    """The sandbox for checks where bubblewrap is on the checks' ``PATH``; None
    where it is not (Linux without it, macOS). ``network``: ``[checks] network``."""
    path = env.get("PATH")
    bwrap = shutil.which("bwrap", path=path)
    return None if bwrap is None else Sandbox(bwrap, tuple(writable), path, network)


async def run_checks(
    checks: Sequence[Check],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    grace_s: float,
    on_start: ProcessStarted,
    sandbox: Sandbox | None = None,
) -> tuple[CheckResult, ...]:
    """Run every check in order; ``timeout_s`` is for a check that names none;
    ``sandbox`` None: unconfined."""
    results = []
    for check in checks:
        limit = check.timeout_ms / 1000 if check.timeout_ms is not None else timeout_s
        ran = await run_check(
            check, cwd=cwd, env=env, timeout_s=limit, grace_s=grace_s, on_start=on_start, sandbox=sandbox
        )
        results.append(ran)
    return tuple(results)


async def run_check(
    check: Check,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    grace_s: float,
    on_start: ProcessStarted,
    sandbox: Sandbox | None = None,
) -> CheckResult:
    """Run one check to its end, or until ``timeout_s`` seconds pass. A program that
    is not there is a failed check (``exit_code`` None, the reason as its output).
    Cancelled, it ends the check's group first."""
    program = check.argv[0]
    found = (cwd / program).is_file() if "/" in program else shutil.which(program, path=env.get("PATH")) is not None
    if not found:
        return CheckResult(check.argv, None, f"cannot start {program!r}: no such executable file")
    argv = list(check.argv) if sandbox is None else sandbox.wrap(check.argv, cwd)
    if sandbox is not None:
        env = {**env, "TMPDIR": str(PRIVATE_TMP)}  # the sandbox's own, empty /tmp
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as err:
        return CheckResult(check.argv, None, f"cannot start {program!r}: {err.strerror or err}")
    assert proc.stdout is not None
    kept = bytearray()
    reader = asyncio.create_task(_keep_tail(proc.stdout, kept))
    timed_out = False
    try:
        await on_start(proc.pid, proc.pid, process_start_time(proc.pid))
        async with asyncio.timeout(timeout_s):
            await proc.wait()
    except TimeoutError:
        timed_out = True
    finally:
        # the group goes, whatever happened: a timeout, a cancel, or what it left behind
        await asyncio.shield(end_process_group(proc.pid, grace_s))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(reader, 2.0)
        reader.cancel()
    output = _tail(bytes(kept))
    if timed_out:
        output = f"{output}\n[vigil: ended after {timeout_s:g}s, the check's timeout]".lstrip("\n")
        return CheckResult(check.argv, None, _tail(output.encode()), timed_out=True)
    return CheckResult(check.argv, proc.returncode, output)


async def _keep_tail(stream: asyncio.StreamReader, kept: bytearray) -> None:
    while chunk := await stream.read(READ_BYTES):
        kept += chunk
        if len(kept) > KEEP_BYTES:
            del kept[: len(kept) - KEEP_BYTES]


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace").rstrip()
    return text[-OUTPUT_TAIL_CHARS:]
