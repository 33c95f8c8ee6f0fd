"""Replacing or removing the database under running processes: ``vigil restore``
does it safely or refuses, and a process whose file was replaced, removed or lost
its write-ahead log stops with one line instead of writing on (docs/reliability.md,
*Files under a running Vigil*)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.reliability.support import WAIT_S, database, run_vigil, running, wait_until

pytestmark = pytest.mark.slow

CONFIG = """\
[dispatch]
executor = "dry-run"
heartbeat = "200ms"
lease = "2s"
"""


def subjects(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [str(r[0]) for r in conn.execute("SELECT subject FROM tasks ORDER BY id")]
    finally:
        conn.close()


def integrity(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def add(home: Path, subject: str) -> None:
    done = run_vigil(home, "task", "add", subject)
    assert done.returncode == 0, done.stderr


def heartbeat_seen(home: Path) -> bool:
    done = run_vigil(home, "status", "--json")
    return done.returncode == 0 and json.loads(done.stdout)["dispatcher"]["alive"]


@pytest.fixture
def home_with_backup(home: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A home with tasks "old 1", "old 2" in a backup, and "new 3" added after it."""
    (home / "vigil.toml").write_text(CONFIG, encoding="utf-8")
    add(home, "old 1")
    add(home, "old 2")
    backup = tmp_path / "backup.db"
    assert run_vigil(home, "backup", str(backup)).returncode == 0
    add(home, "new 3")
    return home, backup


def test_restore_swaps_in_a_verified_copy_and_keeps_the_replaced_file(home_with_backup: tuple[Path, Path]) -> None:
    home, backup = home_with_backup
    done = run_vigil(home, "restore", str(backup))
    assert done.returncode == 0, done.stderr
    assert not Path(f"{database(home)}-wal").exists()  # no log of the old file beside the new one
    assert subjects(database(home)) == ["old 1", "old 2"]
    kept = [p for p in database(home).parent.iterdir() if p.name.startswith("vigil.db.replaced-")]
    assert len(kept) == 1
    assert f"the replaced file is kept as {kept[0]}" in done.stdout
    assert subjects(kept[0]) == ["old 1", "old 2", "new 3"]
    assert integrity(database(home)) == integrity(kept[0]) == "ok"
    add(home, "after the restore")
    assert subjects(database(home)) == ["old 1", "old 2", "after the restore"]
    assert subjects(backup) == ["old 1", "old 2"]  # the backup itself is left as it was


@pytest.mark.parametrize("other", ["run", "events --follow"])
def test_restore_refuses_while_a_vigil_process_has_the_home_open(
    home_with_backup: tuple[Path, Path], other: str
) -> None:
    home, backup = home_with_backup
    before = database(home).read_bytes()
    with running(home, *other.split()) as proc:
        if other == "run":
            wait_until(lambda: heartbeat_seen(home), "the dispatcher's heartbeat")
        else:
            wait_until(lambda: any(p.name.endswith("-shm") for p in database(home).parent.iterdir()), "the follower")
        done = run_vigil(home, "restore", str(backup))
        assert proc.poll() is None
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    expected = "a dispatcher is running on this home" if other == "run" else f"pid {proc.pid} ("
    assert expected in lines[0]
    assert "nothing was changed" in lines[0] or other == "run"
    assert subjects(database(home)) == ["old 1", "old 2", "new 3"]
    assert not any(p.name.startswith("vigil.db.replaced-") for p in database(home).parent.iterdir())
    del before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a database at all\n" * 100, "is not a usable Vigil database"),
        (b"", "is not a Vigil backup"),
    ],
)
def test_restore_refuses_a_backup_that_is_not_one(
    home_with_backup: tuple[Path, Path], tmp_path: Path, content: bytes, message: str
) -> None:
    home, _ = home_with_backup
    bad = tmp_path / "bad.db"
    bad.write_bytes(content)
    done = run_vigil(home, "restore", str(bad))
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert subjects(database(home)) == ["old 1", "old 2", "new 3"]


def test_restore_refuses_a_damaged_backup(home_with_backup: tuple[Path, Path], tmp_path: Path) -> None:
    home, backup = home_with_backup
    damaged = tmp_path / "damaged.db"
    data = bytearray(backup.read_bytes())
    page = 4096
    data[3 * page : 4 * page] = b"\xff" * page  # a b-tree page overwritten
    damaged.write_bytes(bytes(data))
    done = run_vigil(home, "restore", str(damaged))
    assert done.returncode == 2
    assert "nothing was changed" in done.stderr
    assert subjects(database(home)) == ["old 1", "old 2", "new 3"]


def test_vigil_run_stops_when_its_file_is_replaced_and_leaves_the_new_one_whole(
    home_with_backup: tuple[Path, Path],
) -> None:
    """``mv backup.db data/vigil.db`` under a running daemon: it stops with one line
    instead of dispatching on the old file, and its write-ahead log (of the old
    file, named after the path) is not replayed onto the new one."""
    home, backup = home_with_backup
    with running(home, "run") as proc:
        wait_until(lambda: heartbeat_seen(home), "the dispatcher's heartbeat")
        wait_until(lambda: run_vigil(home, "task", "list").stdout.strip() == "no tasks", "the tasks to run")
        os.replace(backup, database(home))  # pending "old 1" and "old 2" again
        code = proc.wait(timeout=WAIT_S)
        _, stderr = proc.communicate(timeout=WAIT_S)
    assert code == 1
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("vigil: error: the database file ")
    assert "was replaced by another file while this process had it open" in last
    assert "Traceback" not in stderr
    assert integrity(database(home)) == "ok"
    listed = json.loads(run_vigil(home, "task", "list", "--json").stdout)["tasks"]
    assert [(t["subject"], t["status"]) for t in listed] == [("old 1", "pending"), ("old 2", "pending")]


def test_vigil_run_stops_when_its_file_is_removed(home_with_backup: tuple[Path, Path]) -> None:
    home, _ = home_with_backup
    with running(home, "run") as proc:
        wait_until(lambda: heartbeat_seen(home), "the dispatcher's heartbeat")
        database(home).unlink()
        code = proc.wait(timeout=WAIT_S)
        _, stderr = proc.communicate(timeout=WAIT_S)
    assert code == 1
    assert "was removed while this process had it open" in stderr.strip().splitlines()[-1]
    assert "Traceback" not in stderr


def test_vigil_run_stops_when_its_log_is_deleted_and_loses_nothing(home_with_backup: tuple[Path, Path]) -> None:
    """``rm vigil.db-wal``: other processes cannot read (and are told why), the
    daemon stops, and closing writes what its log held back into the database."""
    home, _ = home_with_backup
    with running(home, "run") as proc:
        wait_until(lambda: run_vigil(home, "task", "list").stdout.strip() == "no tasks", "the tasks to run")
        wal = Path(f"{database(home)}-wal")
        assert wal.stat().st_size > 0  # the three runs are in the log
        wal.unlink()
        code = proc.wait(timeout=WAIT_S)
        _, stderr = proc.communicate(timeout=WAIT_S)
    assert code == 1
    assert "write-ahead log" in stderr.strip().splitlines()[-1]
    assert "was deleted while this process had the database open" in stderr
    listed = json.loads(run_vigil(home, "task", "list", "--status", "completed", "--json").stdout)["tasks"]
    assert sorted(t["subject"] for t in listed) == ["new 3", "old 1", "old 2"]
    assert integrity(database(home)) == "ok"


def test_events_follow_stops_when_the_file_is_replaced(home_with_backup: tuple[Path, Path]) -> None:
    home, backup = home_with_backup
    with running(home, "events", "--follow") as proc:
        assert proc.stdout is not None
        assert "created" in proc.stdout.readline()
        os.replace(backup, database(home))
        code = proc.wait(timeout=WAIT_S)
        _, stderr = proc.communicate(timeout=WAIT_S)
    assert code == 1
    assert stderr.startswith("vigil: error: the database file ")
    assert "was replaced" in stderr
    assert len(stderr.splitlines()) == 1


def test_a_restore_killed_before_its_swap_leaves_the_database_as_it_was(
    home_with_backup: tuple[Path, Path],
) -> None:
    home, backup = home_with_backup
    killed = run_vigil(home, "restore", str(backup), env={"VIGIL_FAULT": "during-restore"})
    assert killed.returncode == -signal.SIGKILL
    assert subjects(database(home)) == ["old 1", "old 2", "new 3"]
    assert integrity(database(home)) == "ok"
    again = run_vigil(home, "restore", str(backup))
    assert again.returncode == 0, again.stderr
    assert subjects(database(home)) == ["old 1", "old 2"]
    leftovers = [p.name for p in database(home).parent.iterdir() if p.name.endswith(".restoring")]
    assert leftovers == []
