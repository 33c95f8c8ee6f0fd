"""The daemon keeps the write-ahead log small, also under readers that never pause,
and warns about a stuck reader."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from vigil import wal
from vigil.clock import ManualClock
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow


async def test_a_reader_pinning_an_old_snapshot_is_warned_about(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal, "WAL_WARN_PAGES", 5)
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
            keeper = asyncio.create_task(wal.keep_wal_small(store, stop, interval_s=0.05))
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
    monkeypatch.setattr(wal, "WAL_WARN_PAGES", 5)
    store = await SqliteStore.open(tmp_path / "vigil.db", clock=clock)
    stop = asyncio.Event()
    try:
        for n in range(50):
            await store.add_task(NewTask(f"t{n}"))
        with caplog.at_level(logging.WARNING, logger="vigil.daemon"):
            keeper = asyncio.create_task(wal.keep_wal_small(store, stop, interval_s=0.05))
            await asyncio.sleep(0.3)
            stop.set()
            await asyncio.wait_for(keeper, 10)
        logged, copied = await store.checkpoint()
        assert logged == copied
        assert "stuck reader" not in caplog.text
    finally:
        await store.close()


LIMIT_BYTES = 4 * 1024 * 1024  # the keeper's limit in these tests
WRITTEN_BYTES = 40 * 1024 * 1024  # task text the writer commits: ten limits' worth
ROW_BYTES = 64 * 1024
READERS = 4


@contextlib.contextmanager
def _readers_that_never_pause(path: Path) -> Iterator[None]:
    """``READERS`` processes in back-to-back read transactions on ``path``."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.daemon.wal_reader", str(path)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for _ in range(READERS)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()


async def _write_under_readers(tmp_path: Path, clock: ManualClock, *, keep: bool) -> int:
    """Commit ``WRITTEN_BYTES`` of task text while readers never pause, with or
    without the daemon's keeper; returns the largest size the log file reached."""
    path = tmp_path / "vigil.db"
    log_file = wal.wal_path_of(path)
    store = await SqliteStore.open(path, clock=clock)
    stop = asyncio.Event()
    largest = 0
    try:
        await store.add_task(NewTask("first"))  # the readers need the table
        with _readers_that_never_pause(path):
            keeper = (
                asyncio.create_task(
                    wal.keep_wal_small(store, stop, wal_path=log_file, limit_bytes=LIMIT_BYTES, size_check_s=0.005)
                )
                if keep
                else None
            )
            for n in range(WRITTEN_BYTES // ROW_BYTES):
                await store.add_task(NewTask(f"big {n}", description="x" * ROW_BYTES))
                largest = max(largest, log_file.stat().st_size if log_file.exists() else 0)
            stop.set()
            if keeper is not None:
                await asyncio.wait_for(keeper, 30)
    finally:
        await store.close()
    return largest


async def test_without_the_keeper_readers_that_never_pause_let_the_log_grow(tmp_path: Path, clock: ManualClock) -> None:
    """The finding the keeper fixes (and the proof that the next test can fail)."""
    largest = await _write_under_readers(tmp_path, clock, keep=False)
    assert largest > 6 * LIMIT_BYTES  # measured: about 64 MiB


async def test_the_keeper_bounds_the_log_under_readers_that_never_pause(tmp_path: Path, clock: ManualClock) -> None:
    largest = await _write_under_readers(tmp_path, clock, keep=True)
    # the limit, plus what commits between two looks at the file's size and while
    # a reader delays the checkpoint (measured: about 5.5 MiB)
    assert largest < 3 * LIMIT_BYTES


async def test_against_a_reader_stuck_for_good_the_truncate_attempts_back_off(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "vigil.db"
    store = await SqliteStore.open(path, clock=clock)
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        await store.add_task(NewTask("before"))
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM tasks").fetchone()  # a forgotten shell
        for n in range(20):
            await store.add_task(NewTask(f"after {n}"))
        keeper = wal.WalKeeper(store, wal.wal_path_of(path), limit_bytes=0, passive_every=10_000)

        actions = [await keeper.step() for _ in range(64)]

        # each failed attempt stalls writers a moment: tried at ticks 1, 2, 4, 8, 16, 32, 64
        tried = [tick for tick, action in enumerate(actions, start=1) if action == "truncate"]
        assert tried == [1, 2, 4, 8, 16, 32, 64]
        assert keeper.failures == 7
        reader.execute("ROLLBACK")
        actions = [await keeper.step() for _ in range(64)]  # the next try is 64 ticks on
        assert actions.count("truncate") == 1
        assert keeper.failures == 0
        assert wal.wal_path_of(path).stat().st_size == 0
    finally:
        reader.close()
        await store.close()
