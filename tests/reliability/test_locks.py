"""A dispatcher is told by its lock, not only by its heartbeat: ``vigil status`` calls a
killed one DIED at once, ``vigil store migrate`` does not wait for its heartbeat to
go stale, and a dispatcher started while migrate copies stands by until it is done
(docs/reliability.md, *Locks*)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.reliability.support import WAIT_S, database, run_vigil, running, wait_until

pytestmark = pytest.mark.slow

CONFIG = """\
[store]
busy_timeout = "200ms"

[dispatch]
executor = "dry-run"
heartbeat = "30s"
lease = "2m"
"""


def lane_held(home: Path) -> bool:
    """Whether a process holds the dispatcher lock now (probed with a shared lock)."""
    try:
        fd = os.open(home / "data" / "vigil.db.lock", os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def status(home: Path) -> dict[str, object]:
    done = run_vigil(home, "status", "--json")
    assert done.returncode == 0, done.stderr
    value: dict[str, object] = json.loads(done.stdout)["dispatcher"]
    return value


def statuses(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [str(r[0]) for r in conn.execute("SELECT status FROM tasks ORDER BY id")]
    finally:
        conn.close()


def started_and_killed(home: Path) -> int:
    """Start ``vigil run``, wait for its heartbeat, kill it with SIGKILL; its pid."""
    with running(home, "run") as proc:
        wait_until(lambda: status(home)["alive"] is True, "the dispatcher's heartbeat")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT_S)
        return proc.pid


def test_status_calls_a_killed_dispatcher_down_at_once(home: Path) -> None:
    (home / "vigil.toml").write_text(CONFIG, encoding="utf-8")
    pid = started_and_killed(home)
    seen = status(home)
    assert (seen["alive"], seen["lock_held"], seen["heartbeat_fresh"]) == (False, False, True)
    text = run_vigil(home, "status").stdout
    assert f"loop: DIED: pid {pid} on " in text
    assert "no longer holds the dispatcher lock" in text


def test_migrate_refuses_a_running_dispatcher_and_not_a_dead_one(home: Path, postgres_url: str) -> None:
    (home / "vigil.toml").write_text(CONFIG, encoding="utf-8")
    assert run_vigil(home, "task", "add", "one").returncode == 0
    with running(home, "run"):
        wait_until(lambda: status(home)["alive"] is True, "the dispatcher's heartbeat")
        refused = run_vigil(home, "store", "migrate", "--to", postgres_url)
    assert refused.returncode == 2
    assert refused.stderr.startswith("vigil: error: a dispatcher is running on this home (pid ")
    started_and_killed(home)
    moved = run_vigil(home, "store", "migrate", "--to", postgres_url)  # at once: no wait for a stale heartbeat
    assert moved.returncode == 0, moved.stderr
    assert "verified" in moved.stdout


def test_a_dispatcher_started_during_the_copy_stands_by_and_writers_wait(home: Path, postgres_url: str) -> None:
    """The copy is held mid-way (a PostgreSQL session locks a table it must read):
    migrate then holds every lane and SQLite's write lock. A ``vigil run`` started
    meanwhile stands by and runs nothing; a ``vigil task add`` is refused as busy
    (it would stay behind in the SQLite file). Once the copy is committed, every
    task is on PostgreSQL as it was."""
    import psycopg

    (home / "vigil.toml").write_text(CONFIG, encoding="utf-8")
    for n in range(5):
        assert run_vigil(home, "task", "add", f"task {n}").returncode == 0
    assert run_vigil(home, "task", "list", env={"VIGIL_STORE_URL": postgres_url}).returncode == 0  # its schema
    with psycopg.connect(postgres_url) as blocker:
        blocker.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
        with running(home, "store", "migrate", "--to", postgres_url) as migrate:
            wait_until(lambda: lane_held(home), "migrate to hold the lanes")
            with running(home, "run") as daemon:
                assert daemon.stderr is not None
                line = daemon.stderr.readline()
                assert "every dispatcher lane" in line
                assert "(vigil store migrate)" in line
                assert "standing by" in line
                late = run_vigil(home, "task", "add", "late")
                assert late.returncode == 1
                assert "stayed locked" in late.stderr
                assert statuses(database(home)) == ["pending"] * 5
                assert migrate.poll() is None
                blocker.commit()  # lets the copy go on
                assert migrate.wait(timeout=WAIT_S) == 0
                # the lanes are free: it takes one, finds the file moved, and stops
                # instead of running the old file's tasks (issue 38)
                assert daemon.wait(timeout=WAIT_S) == 1
                last = daemon.stderr.read().strip().splitlines()[-1]
                assert "was moved to postgresql://" in last
                assert "Traceback" not in last
            out, err = migrate.communicate(timeout=WAIT_S)
    assert "verified" in out, err
    assert statuses(database(home)) == ["pending"] * 5  # the old file ran nothing
    moved = json.loads(run_vigil(home, "task", "list", "--json", env={"VIGIL_STORE_URL": postgres_url}).stdout)["tasks"]
    assert [(t["subject"], t["status"]) for t in moved] == [(f"task {n}", "pending") for n in range(5)]
