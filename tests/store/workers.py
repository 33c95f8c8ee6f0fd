"""Code that runs in other OS processes during the store's multi-process tests.

Each function is a ``multiprocessing`` target (forked from the fork server of
``tests.processes``, which imports this module once) or a ``python -m
tests.store.workers`` entry point; each opens its own connection.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

from vigil.clock import ManualClock, SystemClock
from vigil.models import DedupScope, NewTask, Outcome, OutcomeKind
from vigil.store.sqlite import SqliteStore


def add_keys(
    path: str, keys: list[str], scope: str, seed: int, barrier: Barrier, results: Queue[tuple[int, list[str]]]
) -> None:
    """Add one task per key (dedup ``scope``), in a shuffled order, once every process
    is ready; report the keys this process created."""

    async def run() -> list[str]:
        store = await SqliteStore.open(Path(path), clock=SystemClock(), busy_timeout_ms=30_000)
        try:
            order = list(keys)
            random.Random(seed).shuffle(order)
            barrier.wait()
            created = []
            for key in order:
                task = NewTask(f"task for {key}", source_key=key, dedup=DedupScope(scope))
                result = await store.add_task(task, actor=f"p{seed}")
                if result.created:
                    created.append(key)
            return created
        finally:
            await store.close()

    results.put((seed, asyncio.run(run())))


def claim_all(
    path: str, now_ms: int, worker: str, barrier: Barrier, results: Queue[tuple[str, list[tuple[int, int, int]]]]
) -> None:
    """Claim and finish tasks until none is due; report (priority, scheduled_for, id)
    of each claim, in order."""

    async def run() -> list[tuple[int, int, int]]:
        store = await SqliteStore.open(Path(path), clock=ManualClock(now_ms), busy_timeout_ms=30_000)
        try:
            barrier.wait()
            seen = []
            while (claim := await store.claim_next(worker=worker, lease_ms=60_000)) is not None:
                task = claim.task
                seen.append((task.priority, task.scheduled_for, task.id))
                await store.record(claim, Outcome(OutcomeKind.SUCCESS), worker=worker)
            return seen
        finally:
            await store.close()

    results.put((worker, asyncio.run(run())))


def open_new(path: str, seed: int, barrier: Barrier, results: Queue[tuple[int, str]]) -> None:
    """Open (creating and migrating) the store at once with the other processes, add a
    task; report "ok" or the error's type and message."""

    async def run() -> str:
        barrier.wait()
        try:
            store = await SqliteStore.open(Path(path), clock=SystemClock())
        except Exception as err:  # reported to the test, which names it
            return f"{type(err).__module__}.{type(err).__name__}: {err}"
        try:
            await store.add_task(NewTask(f"from process {seed}"), actor=f"p{seed}")
        finally:
            await store.close()
        return "ok"

    results.put((seed, asyncio.run(run())))


def die_mid_batch(path: str, count: int) -> None:
    """Insert ``count`` tasks through the store's own insert inside one write
    transaction, say ``inside`` on stdout, and wait there to be killed."""
    from vigil.store.sqlite.db import SqliteTx
    from vigil.store.tasks import insert_task  # the real insert path, paused mid-way

    async def run() -> None:
        clock = ManualClock()
        store = await SqliteStore.open(Path(path), clock=clock)

        def body(conn: sqlite3.Connection) -> None:
            for i in range(count):
                insert_task(SqliteTx(conn), NewTask(f"doomed {i}", source_key=f"doomed-{i}"), clock.now_ms(), "test", 3)
            print("inside", flush=True)
            time.sleep(600)

        await store._db.write(body)

    asyncio.run(run())


def hold_write_lock(path: str, hold_s: float | None) -> None:
    """Take the write lock with ``BEGIN IMMEDIATE``, write a row, say ``locked`` on
    stdout, then commit after ``hold_s`` seconds or, when None, once stdin closes."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO loop_state (key, value) VALUES ('holder', '1')")
    print("locked", flush=True)
    if hold_s is None:
        sys.stdin.read()
    else:
        time.sleep(hold_s)
    conn.execute("COMMIT")
    conn.close()


if __name__ == "__main__":
    if sys.argv[2] == "die-mid-batch":
        die_mid_batch(sys.argv[1], int(sys.argv[3]))
    else:
        hold_write_lock(sys.argv[1], None if sys.argv[2] == "stdin" else float(sys.argv[2]))
