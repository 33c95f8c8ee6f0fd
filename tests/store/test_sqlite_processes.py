"""Several OS processes on one SQLite file: dedup races, claim races, a held lock."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from pathlib import Path
from typing import TypeVar

import pytest

from tests.conftest import REPO
from tests.processes import PROCESSES
from tests.store import workers
from tests.store.contract import all_tasks, new
from vigil.clock import ManualClock
from vigil.errors import StoreBusy
from vigil.models import DedupScope, TaskStatus
from vigil.store.sqlite import SqliteStore
from vigil.store.sqlite import db as sqlite_db

pytestmark = pytest.mark.slow

JOIN_TIMEOUT_S = 90  # a safety net against a hung child, not a measurement

Report = TypeVar("Report")


def _run_all(processes: Sequence[BaseProcess], results: Queue[Report], n: int) -> list[Report]:
    for p in processes:
        p.start()
    got = [results.get(timeout=JOIN_TIMEOUT_S) for _ in range(n)]
    for p in processes:
        p.join(JOIN_TIMEOUT_S)
        assert p.exitcode == 0
    return got


@pytest.mark.parametrize("scope", list(DedupScope))
async def test_twenty_processes_adding_the_same_keys_create_each_once(
    tmp_path: Path, clock: ManualClock, scope: DedupScope
) -> None:
    path = tmp_path / "vigil.db"
    await (await SqliteStore.open(path, clock=clock)).close()  # migrate once, up front
    keys = [f"key-{i}" for i in range(100)]
    n = 20
    barrier = PROCESSES.Barrier(n)
    results: Queue[tuple[int, list[str]]] = PROCESSES.Queue()
    processes = [
        PROCESSES.Process(target=workers.add_keys, args=(str(path), keys, str(scope), seed, barrier, results))
        for seed in range(n)
    ]
    reports = _run_all(processes, results, n)

    created = Counter(key for _, keys_created in reports for key in keys_created)
    assert created == Counter(keys)  # every key reported created exactly once, across processes
    async with await SqliteStore.open(path, clock=clock) as store:
        tasks = await all_tasks(store)
        assert sorted(t.source_key or "" for t in tasks) == sorted(keys)
        assert (await store.count_by_status())[TaskStatus.PENDING] == 100


async def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "new" / "vigil.db"
    n = 12
    barrier = PROCESSES.Barrier(n)
    results: Queue[tuple[int, str]] = PROCESSES.Queue()
    processes = [PROCESSES.Process(target=workers.open_new, args=(str(path), i, barrier, results)) for i in range(n)]
    reports = dict(_run_all(processes, results, n))
    assert reports == dict.fromkeys(range(n), "ok")
    async with await SqliteStore.open(path, clock=clock) as store:
        assert len(await all_tasks(store)) == n


async def test_eight_processes_claim_every_task_exactly_once_in_order(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "vigil.db"
    rng = random.Random(7)
    now = clock.now_ms()
    async with await SqliteStore.open(path, clock=clock) as store:
        batch = [
            new(f"t{i}", priority=rng.randint(1, 9), scheduled_for=now - rng.randint(0, 50_000)) for i in range(2000)
        ]
        result = await store.add_tasks(batch, actor="test")
    all_ids = set(result.created_ids)
    assert len(all_ids) == 2000

    n = 8
    barrier = PROCESSES.Barrier(n)
    results: Queue[tuple[str, list[tuple[int, int, int]]]] = PROCESSES.Queue()
    processes = [
        PROCESSES.Process(target=workers.claim_all, args=(str(path), now, f"w{i}", barrier, results)) for i in range(n)
    ]
    reports = dict(_run_all(processes, results, n))

    claimed = [key[2] for seq in reports.values() for key in seq]
    assert len(claimed) == len(set(claimed)) == 2000  # none twice
    assert set(claimed) == all_ids  # none lost
    for worker, seq in reports.items():
        assert seq == sorted(seq), f"{worker} took tasks out of (priority, due time, id) order"
    async with await SqliteStore.open(path, clock=clock) as store:
        counts = await store.count_by_status()
        assert counts[TaskStatus.COMPLETED] == 2000
        assert sum(counts.values()) == 2000
        for task_id in rng.sample(sorted(all_ids), 20):
            assert [r.attempt for r in await store.list_runs(task_id)] == [1]


@contextmanager
def _lock_holder(path: Path, hold: str) -> Iterator[subprocess.Popen[str]]:
    """A process that holds the write lock from entry (for ``hold`` seconds, or until
    its stdin closes); on exit, waits for it to commit and checks it succeeded."""
    with subprocess.Popen(
        [sys.executable, "-m", "tests.store.workers", str(path), hold],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdin is not None
        assert holder.stdout.readline().strip() == "locked"
        try:
            yield holder
        finally:
            holder.stdin.close()
            assert holder.wait(JOIN_TIMEOUT_S) == 0


async def test_a_writer_waits_for_another_process_lock_and_succeeds(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No whole-unit retries: the busy timeout alone must carry the write through.
    monkeypatch.setattr(sqlite_db, "BUSY_RETRIES", 0)
    path = tmp_path / "vigil.db"
    async with await SqliteStore.open(path, clock=clock, busy_timeout_ms=30_000) as store:
        with _lock_holder(path, "1.0"):
            result = await store.add_task(new("written after the lock is released"))
        assert result.created
        assert [t.subject for t in await all_tasks(store)] == ["written after the lock is released"]
        assert (await store.loop_values())["holder"] == 1


async def test_a_writer_that_outlasts_every_retry_gets_store_busy(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "vigil.db"
    async with await SqliteStore.open(path, clock=clock, busy_timeout_ms=50) as store:
        await store.add_task(new("before"))
        before = await all_tasks(store)
        with _lock_holder(path, "stdin"), pytest.raises(StoreBusy) as busy:
            await store.add_tasks([new("a"), new("b"), new("c")], actor="sensor:s")
        message = str(busy.value)
        assert "locked" in message
        assert "\n" not in message
        assert await all_tasks(store) == before  # nothing of the batch was written
        assert (await store.count_by_status())[TaskStatus.PENDING] == 1
        assert (await store.loop_values())["holder"] == 1
        assert (await store.add_tasks([new("a")], actor="sensor:s")).created == 1


async def test_a_writer_killed_mid_batch_leaves_nothing_of_it(tmp_path: Path, clock: ManualClock) -> None:
    """SIGKILL while a batch is half inserted: the batch is gone, the file is sound,
    the lock is free and the counts still match the rows."""
    path = tmp_path / "vigil.db"
    async with await SqliteStore.open(path, clock=clock) as store:
        kept = await store.add_task(new("committed before", source_key="doomed-7"))
    with subprocess.Popen(
        [sys.executable, "-m", "tests.store.workers", str(path), "die-mid-batch", "2000"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    ) as writer:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "inside"
        writer.kill()
        assert writer.wait(JOIN_TIMEOUT_S) == -signal.SIGKILL
    async with await SqliteStore.open(path, clock=clock, busy_timeout_ms=100) as store:
        assert await store.integrity_check() == "ok"
        assert [t.id for t in await all_tasks(store)] == [kept.task_id]
        counts = await store.count_by_status()
        assert (counts[TaskStatus.PENDING], sum(counts.values())) == (1, 1)
        again = await store.add_task(new("doomed 0", source_key="doomed-0"))
        assert again.created
        assert [e.kind for e in await store.list_events(again.task_id or 0)] == ["created"]


async def test_opening_and_reading_work_while_another_process_writes(tmp_path: Path, clock: ManualClock) -> None:
    """The TUI and `vigil task list` must not wait for the daemon's write lock."""
    path = tmp_path / "vigil.db"
    async with await SqliteStore.open(path, clock=clock) as store:
        added = await store.add_task(new("visible"))
    with _lock_holder(path, "stdin"):
        async with await SqliteStore.open(path, clock=clock, busy_timeout_ms=50) as reader:
            assert [t.id for t in await all_tasks(reader)] == [added.task_id]
            assert (await reader.count_by_status())[TaskStatus.PENDING] == 1
            assert await reader.loop_values() == {}  # the holder's row is not committed yet
