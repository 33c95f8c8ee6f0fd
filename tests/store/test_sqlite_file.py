"""The SQLite file itself: migrations, refusals, permissions, pragmas, backup."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from tests.store.contract import all_tasks, new
from vigil.clock import ManualClock
from vigil.errors import InputError, NotADatabase, SchemaTooNew, StoreBusy, StoreError
from vigil.store.sqlite import SqliteStore
from vigil.store.sqlite.db import Database
from vigil.store.sqlite.schema import SCHEMA_VERSION


def _schema(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT type, name FROM sqlite_master ORDER BY type, name").fetchall()
    finally:
        conn.close()
    return [(str(t), str(n)) for t, n in rows]


def _user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


async def test_migrates_a_new_file_and_reopening_is_a_no_op(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "fresh" / "vigil.db"
    async with await SqliteStore.open(path, clock=clock) as store:
        added = await store.add_task(new("survives a reopen"))
    assert _user_version(path) == SCHEMA_VERSION
    schema = _schema(path)
    names = {name for _, name in schema}
    assert {"tasks", "runs", "task_events", "notes", "task_deps", "sensor_state", "loop_state"} <= names
    async with await SqliteStore.open(path, clock=clock) as store:
        assert [t.id for t in await all_tasks(store)] == [added.task_id]
    assert _schema(path) == schema
    assert _user_version(path) == SCHEMA_VERSION


async def test_migrates_an_existing_empty_file(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "vigil.db"
    path.touch(mode=0o600)
    async with await SqliteStore.open(path, clock=clock) as store:
        assert (await store.add_task(new("x"))).created
    assert _user_version(path) == SCHEMA_VERSION


async def test_refuses_a_newer_schema_and_leaves_the_file_alone(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "vigil.db"
    async with await SqliteStore.open(path, clock=clock) as store:
        await store.add_task(new("from the future"))
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(SchemaTooNew, match=f"schema version {SCHEMA_VERSION + 1}"):
        await SqliteStore.open(path, clock=clock)
    assert path.read_bytes() == before
    assert _user_version(path) == SCHEMA_VERSION + 1


async def test_refuses_a_newer_schema_before_touching_a_rollback_journal_file(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A future Vigil may not use WAL: opening must not switch its journal mode."""
    path = tmp_path / "vigil.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE tasks (id INTEGER PRIMARY KEY)")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(SchemaTooNew):
        await SqliteStore.open(path, clock=clock)
    assert path.read_bytes() == before
    assert _journal_mode(path) == "delete"


@pytest.mark.parametrize("table", ["photos", "tasks"])
async def test_refuses_another_applications_sqlite_database(tmp_path: Path, clock: ManualClock, table: str) -> None:
    """A home pointed at some other SQLite file must not add Vigil's tables to it."""
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute(f"INSERT INTO {table} (name) VALUES ('keep me')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(NotADatabase, match="not a Vigil database"):
        await SqliteStore.open(path, clock=clock)
    assert path.read_bytes() == before
    assert _schema(path) == [("table", table)]


@pytest.mark.parametrize("content", [b"not a database at all\n" * 40, b"\x00\xff" * 4096])
async def test_refuses_a_file_that_is_not_a_database(tmp_path: Path, clock: ManualClock, content: bytes) -> None:
    path = tmp_path / "vigil.db"
    path.write_bytes(content)
    with pytest.raises(NotADatabase, match="not a Vigil database"):
        await SqliteStore.open(path, clock=clock)
    assert path.read_bytes() == content


async def test_file_is_0600_in_a_0700_folder(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "new-home" / "vigil.db"
    async with await SqliteStore.open(path, clock=clock) as store:
        await store.add_task(new("private"))
        # The write-ahead log and its index hold task text too.
        for sidecar in (Path(f"{path}-wal"), Path(f"{path}-shm")):
            assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600, sidecar
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


async def test_pragmas_are_in_effect(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "vigil.db"
    async with await SqliteStore.open(path, clock=clock) as store:
        # synchronous and foreign_keys are per connection: ask the store's own one.
        got = await store._db.read(
            lambda conn: {
                p: conn.execute(f"PRAGMA {p}").fetchone()[0]
                for p in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
            }
        )
        assert got == {"journal_mode": "wal", "synchronous": 2, "foreign_keys": 1, "busy_timeout": 5000}
        # foreign_keys really enforced: a dependency on a missing task is refused by
        # the schema even when the store's own check is bypassed.
        with pytest.raises(InputError, match="FOREIGN KEY constraint failed"):
            await store._db.write(lambda conn: conn.execute("INSERT INTO task_deps VALUES (1, 999)"))
    assert _journal_mode(path) == "wal"  # persistent: recorded in the file itself


def _journal_mode(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


async def test_a_constraint_the_store_did_not_foresee_is_a_vigil_error(tmp_path: Path, clock: ManualClock) -> None:
    """Driver errors never leave the store: a CHECK failure in a write becomes an
    ``InputError`` and the transaction is rolled back."""
    async with await SqliteStore.open(tmp_path / "v.db", clock=clock) as store:
        await store.add_task(new("x"))

        def two_writes(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE tasks SET subject = 'renamed' WHERE id = 1")
            conn.execute("UPDATE tasks SET priority = 0 WHERE id = 1")

        with pytest.raises(InputError, match="CHECK constraint failed") as refused:
            await store._db.write(two_writes)
        assert not isinstance(refused.value, sqlite3.Error)
        assert (await store.get_task(1)).subject == "x"


async def test_normal_synchronous_only_when_asked(tmp_path: Path, clock: ManualClock) -> None:
    async with await SqliteStore.open(tmp_path / "v.db", clock=clock, synchronous="NORMAL") as store:
        assert await store._db.read(lambda conn: conn.execute("PRAGMA synchronous").fetchone()[0]) == 1


async def test_backup_opens_and_holds_the_same_tasks(tmp_path: Path, clock: ManualClock) -> None:
    async with await SqliteStore.open(tmp_path / "live" / "vigil.db", clock=clock) as store:
        for i in range(20):
            await store.add_task(new(f"task {i}", source_key=f"k{i}"))
        await store.add_note(3, "a note", author="human")
        target = tmp_path / "backups" / "copy.db"
        target.parent.mkdir()  # a backup does not make folders (vigil backup into a mistyped one must fail)
        await store.backup(target)
        live = await all_tasks(store)
        await store.add_task(new("after the backup"))
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    async with await SqliteStore.open(target, clock=clock) as copy:
        assert await all_tasks(copy) == live
        assert [n.text for n in await copy.list_notes(3)] == ["a note"]
        assert await copy.integrity_check() == "ok"
        assert not (await copy.add_task(new("dup", source_key="k0"))).created


@pytest.mark.parametrize("where", ["a file that is not a database", "a folder", "below a file"])
async def test_a_backup_that_cannot_be_written_names_the_target(tmp_path: Path, clock: ManualClock, where: str) -> None:
    live = tmp_path / "live" / "vigil.db"
    junk = tmp_path / "notes.txt"
    junk.write_text("my notes, not a database\n" * 50)
    target = {"a file that is not a database": junk, "a folder": tmp_path, "below a file": junk / "copy.db"}[where]
    async with await SqliteStore.open(live, clock=clock) as store:
        await store.add_task(new("precious"))
        with pytest.raises(StoreError) as failed:
            await store.backup(target)
        message = str(failed.value)
        assert f"to {target}" in message
        assert not isinstance(failed.value, NotADatabase)  # the live database is fine
        assert junk.read_text() == "my notes, not a database\n" * 50
        assert [t.subject for t in await all_tasks(store)] == ["precious"]


async def test_opening_retries_a_file_another_process_is_still_configuring(tmp_path: Path) -> None:
    # Switching a new file to WAL can answer "locked" at once, without the busy
    # handler's wait, while another process switches it: the open tries again.
    answers = ["locked", "locked"]

    def check(conn: sqlite3.Connection, path: Path) -> None:
        if answers:
            answers.pop()
            raise sqlite3.OperationalError("database is locked")

    db = await Database.open(tmp_path / "vigil.db", busy_timeout_ms=5000, check=check)
    try:
        assert answers == []
        assert await db.read(lambda conn: conn.execute("PRAGMA journal_mode").fetchone()[0]) == "wal"
    finally:
        await db.close()


async def test_opening_a_file_locked_past_the_busy_timeout_is_one_clear_error(tmp_path: Path) -> None:
    def check(conn: sqlite3.Connection, path: Path) -> None:
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(StoreBusy, match="stayed locked by another process"):
        await Database.open(tmp_path / "vigil.db", busy_timeout_ms=100, check=check)
