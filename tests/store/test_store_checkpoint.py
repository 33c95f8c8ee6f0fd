"""Contract: a passive WAL checkpoint, and what a stuck reader does to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.store.contract import new
from vigil.store import Store


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
