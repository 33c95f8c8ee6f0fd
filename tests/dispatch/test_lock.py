"""The dispatcher lock: one holder per database, freed by the kernel on exit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from dispatch.lock import DispatcherLock, lock_path_for
from vigil.clock import ManualClock

HOLD_SCRIPT = """
import sys, time
from pathlib import Path
from dispatch.lock import DispatcherLock
from vigil.clock import SystemClock
lock = DispatcherLock(Path(sys.argv[1]), SystemClock())
assert lock.try_acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_lock_file_sits_beside_the_database(tmp_path: Path) -> None:
    assert lock_path_for(tmp_path / "data" / "vigil.db") == tmp_path / "data" / "vigil.db.lock"


def test_only_one_holder_and_it_says_who_it_is(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "vigil.db.lock"
    first, second = DispatcherLock(path, clock), DispatcherLock(path, clock)

    assert first.try_acquire()
    assert first.held
    assert not second.try_acquire()
    assert not second.held

    holder = second.holder()
    assert holder is not None
    assert (holder.pid, holder.host, holder.since) == (os.getpid(), socket.gethostname(), clock.now_ms())
    assert f"pid {os.getpid()}" in holder.describe()
    assert (path.stat().st_mode & 0o777) == 0o600


def test_release_lets_the_next_one_take_it(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "vigil.db.lock"
    first, second = DispatcherLock(path, clock), DispatcherLock(path, clock)
    assert first.try_acquire()

    first.release()
    first.release()  # idempotent

    assert second.holder() is None  # released: no stale holder details
    clock.advance(1000)
    assert second.try_acquire()
    holder = first.holder()
    assert holder is not None
    assert holder.since == clock.now_ms()


def test_holder_of_a_missing_or_garbled_file_is_none(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "vigil.db.lock"
    assert DispatcherLock(path, clock).holder() is None
    path.write_text("not json")
    assert DispatcherLock(path, clock).holder() is None


def test_the_kernel_frees_the_lock_of_a_killed_process(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "vigil.db.lock"
    proc = subprocess.Popen([sys.executable, "-c", HOLD_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        ours = DispatcherLock(path, clock)
        assert not ours.try_acquire()
        holder = ours.holder()
        assert holder is not None
        assert holder.pid == proc.pid

        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

        deadline = time.monotonic() + 10
        while not ours.try_acquire():
            assert time.monotonic() < deadline, "the lock of a dead process was not freed"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
