"""After ``vigil store migrate`` the old SQLite file is marked moved, inside the file:
every Vigil process refuses to read or write it, one that had it open before the
move included, and says where the home's store went (issue 38's fault hunt: a
``vigil task add`` just after the copy landed only in SQLite, and a ``vigil run``
that stood by during the copy then ran the old file's tasks). The dispatcher that
stood by is tests/reliability/test_locks.py's."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.reliability.support import database, run_vigil
from vigil.errors import StoreMoved
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore
from vigil.store.sqlite.schema import SCHEMA_VERSION
from vigil.store_url import mask_password

pytestmark = pytest.mark.slow


def _rows(path: Path) -> list[tuple[object, ...]]:
    """Every row of the tasks and their history, read without Vigil."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [
            (table, *row)
            for table in ("tasks", "task_events", "notes", "loop_state")
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1")
        ]
    finally:
        conn.close()


def _user_version(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.timeout(180)
async def test_the_old_file_refuses_every_reader_and_writer_after_a_migrate(home: Path, postgres_url: str) -> None:
    for n in range(3):
        assert run_vigil(home, "task", "add", f"task {n}").returncode == 0
    opened_before = await SqliteStore.open(database(home))  # as a dashboard left open would have it
    try:
        moved = run_vigil(home, "store", "migrate", "--to", postgres_url)
        assert moved.returncode == 0, moved.stderr
        assert "marked moved" in moved.stdout
        before = _rows(database(home))
        where = mask_password(postgres_url)

        for args in (
            ("task", "add", "late"),
            ("task", "list"),
            ("task", "note", "1", "late note"),
            ("status",),
            ("backup", str(home / "copy.db")),
            ("store", "migrate", "--to", postgres_url),
        ):
            done = run_vigil(home, *args)
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            (line,) = done.stderr.splitlines()
            assert line.startswith(f"vigil: error: {database(home)} was moved to {where} by vigil store migrate on ")
            assert "[store] url in vigil.toml, or VIGIL_STORE_URL" in line

        with pytest.raises(StoreMoved, match="was moved to"):
            await opened_before.add_task(NewTask("from a process that had it open"))
        with pytest.raises(StoreMoved):
            await opened_before.list_tasks()
        assert opened_before.file_problem() is not None  # what the daemon's watcher stops on
    finally:
        await opened_before.close()

    assert _rows(database(home)) == before  # nothing reached the old file
    assert _user_version(database(home)) > SCHEMA_VERSION  # a Vigil from before the mark refuses it as too new
    followed = run_vigil(home, "task", "add", "late", env={"VIGIL_STORE_URL": postgres_url})
    assert followed.returncode == 0, followed.stderr
    assert "created task #4" in followed.stdout  # the home's store now: PostgreSQL, ids continued
