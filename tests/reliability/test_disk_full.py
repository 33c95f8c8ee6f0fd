"""A full disk under ``vigil run`` is the machine's problem, not the tasks': runs that
cannot write their transcript are given back uncounted, nothing is gated as if the
work had failed, the loop waits and says so once per wait, the log does not spill
tracebacks, ``vigil status`` does not call the live dispatcher DOWN, and the work
resumes when space returns (docs/reliability.md, *A full disk*).

A small tmpfs is mounted over ``logs/`` or ``data/`` and filled: root only.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.reliability.support import WAIT_S, run_vigil, wait_until

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small filesystem needs root"), pytest.mark.slow]
CONFIG = """\
[dispatch]
executor = "dry-run"
max_retries = 0
retry_backoff = "300ms"
retry_backoff_max = "600ms"
heartbeat = "200ms"
lease = "2s"

[limits]
max_consecutive_failures = 1
"""


@contextmanager
def small_disk(folder: Path, size_k: int = 256) -> Iterator[Path]:
    """``folder`` on a tmpfs of its own, its files copied in and back out; yields the
    filler file that fills it (delete it to free the space)."""
    aside = folder.with_name(folder.name + ".aside")
    aside.mkdir()
    for path in folder.iterdir():
        os.replace(path, aside / path.name)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_k}k,mode=0700", "tmpfs", str(folder)], check=True)
    try:
        for path in aside.iterdir():
            (folder / path.name).write_bytes(path.read_bytes())
            (folder / path.name).chmod(0o600)
        yield folder / "filler"
    finally:
        for path in folder.iterdir():
            if path.name != "filler" and path.is_file():
                (aside / path.name).write_bytes(path.read_bytes())
        subprocess.run(["umount", "-l", str(folder)], check=True)
        for path in aside.iterdir():
            os.replace(path, folder / path.name)
        aside.rmdir()


def fill(filler: Path) -> None:
    """Write ``filler`` until the filesystem is full."""
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


class Daemon:
    """``vigil run`` in the background; its stderr lines are collected as they come."""

    def __init__(self, home: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def said(self, text: str) -> int:
        return sum(text in line for line in list(self.lines))

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=WAIT_S)
        self._reader.join(timeout=WAIT_S)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return code


def rows(home: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(f"file:{home / 'data' / 'vigil.db'}?mode=ro", uri=True)
    try:
        return [(str(s), int(a)) for s, a in conn.execute("SELECT status, attempt_count FROM tasks ORDER BY id")]
    finally:
        conn.close()


def dispatcher(home: Path) -> dict[str, object]:
    done = run_vigil(home, "status", "--json")
    assert done.returncode == 0, done.stderr
    value: dict[str, object] = json.loads(done.stdout)
    return value


def fresh(home: Path) -> object:
    """Whether the dispatcher's heartbeat is fresh (None before it wrote one)."""
    seen = dispatcher(home)["dispatcher"]
    assert isinstance(seen, dict)
    return seen.get("heartbeat_fresh")


def test_a_full_disk_gives_runs_back_waits_and_resumes(home: Path) -> None:
    (home / "vigil.toml").write_text(CONFIG, encoding="utf-8")
    for subject in ("one", "two"):
        assert run_vigil(home, "task", "add", subject).returncode == 0
    with small_disk(home / "logs") as filler:
        fill(filler)
        daemon = Daemon(home)
        try:
            wait_until(lambda: daemon.said("not running tasks for") >= 2, "two waits for space")
            # given back, nothing counted; between two waits the loop tries again, so a
            # look may find one claimed for that moment: wait for a look between tries
            given_back = [("pending", 0), ("pending", 0)]
            wait_until(lambda: rows(home) == given_back, "both tasks given back with no attempt counted")
            status = dispatcher(home)
            assert status["gate"]["state"] == "running"  # type: ignore[index]
            assert status["dispatcher"]["alive"] is True  # type: ignore[index]
            filler.unlink()  # space returns
            wait_until(lambda: [s for s, _ in rows(home)] == ["completed", "completed"], "the tasks to run")
            assert rows(home) == [("completed", 1), ("completed", 1)]
        finally:
            code = daemon.stop()
    text = "".join(daemon.lines)
    assert code == 0, text
    assert "--- Logging error ---" not in text
    assert "Traceback" not in text
    assert daemon.said("cannot write the log") == 1
    assert daemon.said("WARNING") == daemon.said("not running tasks for")  # one warning per wait, no other
    assert daemon.said("the disk has room again") == 1


def test_status_does_not_call_a_dispatcher_that_cannot_write_down(home: Path) -> None:
    """The database's own disk fills up: the dispatcher cannot write its heartbeat,
    but it holds its lock, and ``vigil status`` says it is alive and why it is
    silent. Its failing heartbeat is logged once, not at every beat."""
    (home / "vigil.toml").write_text(CONFIG, encoding="utf-8")
    assert run_vigil(home, "task", "add", "before").returncode == 0
    with small_disk(home / "data", size_k=1024) as filler:
        daemon = Daemon(home)
        try:
            wait_until(lambda: fresh(home) is True, "a heartbeat")
            fill(filler)
            wait_until(lambda: fresh(home) is False, "a stale heartbeat")
            seen = dispatcher(home)["dispatcher"]
            assert (seen["alive"], seen["lock_held"]) == (True, True)  # type: ignore[index]
            text = run_vigil(home, "status").stdout
            assert "holds the dispatcher lock), but its heartbeat is" in text
            assert "DOWN" not in text
            time.sleep(1.5)  # several beats fail meanwhile
            filler.unlink()
            wait_until(lambda: fresh(home) is True, "the heartbeat again")
        finally:
            code = daemon.stop()
    assert code == 0, "".join(daemon.lines)
    assert daemon.said("could not write the heartbeat") == 1
    assert daemon.said("the heartbeat is written again") == 1
