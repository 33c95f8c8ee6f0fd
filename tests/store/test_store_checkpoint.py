"""Contract: passive and truncating WAL checkpoints, and what a stuck reader does to them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.store.contract import new
from vigil.store import Store
from vigil.store.sqlite import SqliteStore


@pytest.fixture
def backend() -> str:
    """The write-ahead log is SQLite's: these run on SQLite only (PostgreSQL's
    checkpoint() is (0, 0), tested in test_postgres_store.py)."""
    return "sqlite"


async def test_checkpoint_copies_the_whole_log_when_nobody_reads(store: Store) -> None:
    for n in range(20):
        await store.add_task(new(f"t{n}"))

    logged, copied = await store.checkpoint()

    assert logged > 0
    assert copied == logged


async def test_a_reader_holding_an_old_snapshot_keeps_pages_in_the_log(store: Store, db_path: Path) -> None:
    await store.add_task(new("before"))
    await store.checkpoint()
    reader = sqlite3.connect(db_path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM tasks").fetchone()  # pins the snapshot
        for n in range(20):
            await store.add_task(new(f"after {n}"))

        logged, copied = await store.checkpoint()

        assert logged > copied
    finally:
        reader.execute("ROLLBACK")
        reader.close()
    logged, copied = await store.checkpoint()
    assert copied == logged


async def test_a_truncate_checkpoint_empties_the_log_file(store: Store, db_path: Path) -> None:
    for n in range(20):
        await store.add_task(new(f"t{n}"))
    wal = db_path.with_name(db_path.name + "-wal")
    assert wal.stat().st_size > 0

    assert await store.checkpoint(truncate=True) == (0, 0)

    assert wal.stat().st_size == 0
    assert len(await store.list_tasks()) == 20  # and the store goes on


async def test_a_truncate_checkpoint_gives_up_on_a_reader_that_stays(store: Store, db_path: Path) -> None:
    await store.add_task(new("before"))
    await store.checkpoint()
    reader = sqlite3.connect(db_path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM tasks").fetchone()  # pins the snapshot
        for n in range(20):
            await store.add_task(new(f"after {n}"))

        logged, copied = await store.checkpoint(truncate=True)

        assert logged > copied  # it waited its short while, then left the log as it was
        assert db_path.with_name(db_path.name + "-wal").stat().st_size > 0
    finally:
        reader.execute("ROLLBACK")
        reader.close()
    # the connection has its own busy timeout back (the short bound was the checkpoint's)
    assert isinstance(store, SqliteStore)
    assert await store._db.read(lambda conn: conn.execute("PRAGMA busy_timeout").fetchone()[0]) == 5000
    assert await store.checkpoint(truncate=True) == (0, 0)
