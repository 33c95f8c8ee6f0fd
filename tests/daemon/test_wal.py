"""The daemon keeps the write-ahead log small and warns about a stuck reader."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from vigil import daemon
from vigil.clock import ManualClock
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore


async def test_a_reader_pinning_an_old_snapshot_is_warned_about(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daemon, "WAL_WARN_PAGES", 5)
    path = tmp_path / "vigil.db"
    store = await SqliteStore.open(path, clock=clock)
    reader = sqlite3.connect(path, isolation_level=None)
    stop = asyncio.Event()
    try:
        await store.add_task(NewTask("before"))
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM tasks").fetchone()
        for n in range(50):
            await store.add_task(NewTask(f"after {n}"))
        with caplog.at_level(logging.WARNING, logger="vigil.daemon"):
            keeper = asyncio.create_task(daemon.keep_wal_small(store, stop, interval_s=0.05))
            for _ in range(200):
                if "stuck reader" in caplog.text:
                    break
                await asyncio.sleep(0.02)
            stop.set()
            await asyncio.wait_for(keeper, 10)
        assert "stuck reader" in caplog.text
    finally:
        reader.execute("ROLLBACK")
        reader.close()
        await store.close()


async def test_without_readers_the_log_is_copied_back_quietly(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daemon, "WAL_WARN_PAGES", 5)
    store = await SqliteStore.open(tmp_path / "vigil.db", clock=clock)
    stop = asyncio.Event()
    try:
        for n in range(50):
            await store.add_task(NewTask(f"t{n}"))
        with caplog.at_level(logging.WARNING, logger="vigil.daemon"):
            keeper = asyncio.create_task(daemon.keep_wal_small(store, stop, interval_s=0.05))
            await asyncio.sleep(0.3)
            stop.set()
            await asyncio.wait_for(keeper, 10)
        logged, copied = await store.checkpoint()
        assert logged == copied
        assert "stuck reader" not in caplog.text
    finally:
        await store.close()
