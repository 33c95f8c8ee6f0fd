"""Several OS processes on one PostgreSQL database: the dedup race.

Mirrors the SQLite race in test_sqlite_processes.py: 20 processes, each with its own
connections (as on separate hosts), add the same 100 keys in different orders at
once; the partial unique indexes must let exactly one task per key through.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.processes import PROCESSES
from tests.store import postgres_workers
from tests.store.contract import all_tasks
from vigil.clock import ManualClock
from vigil.models import DedupScope, NewTask, TaskStatus

JOIN_TIMEOUT_S = 120  # a safety net against a hung child, not a measurement


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scope", list(DedupScope))
async def test_twenty_processes_adding_the_same_keys_create_each_once(
    postgres_migrated_url: str, clock: ManualClock, scope: DedupScope
) -> None:
    from vigil.store.postgres import PostgresStore

    async with await PostgresStore.open(postgres_migrated_url, clock=clock) as store:
        assert sum((await store.count_by_status()).values()) == 0
    keys = [f"key-{i}" for i in range(100)]
    n = 20
    barrier = PROCESSES.Barrier(n)
    results = PROCESSES.Queue()
    processes = [
        PROCESSES.Process(
            target=postgres_workers.add_keys, args=(postgres_migrated_url, keys, str(scope), seed, barrier, results)
        )
        for seed in range(n)
    ]
    for p in processes:
        p.start()
    reports = [results.get(timeout=JOIN_TIMEOUT_S) for _ in range(n)]
    for p in processes:
        p.join(JOIN_TIMEOUT_S)
        assert p.exitcode == 0

    created = Counter(key for _, keys_created in reports for key in keys_created)
    assert created == Counter(keys)  # every key reported created exactly once, across processes
    store = await PostgresStore.open(postgres_migrated_url, clock=clock)
    try:
        tasks = await all_tasks(store)
        assert sorted(t.source_key or "" for t in tasks) == sorted(keys)
        assert all(t.status is TaskStatus.PENDING for t in tasks)
        assert (await store.count_by_status())[TaskStatus.PENDING] == 100
        # and the database itself still refuses a second open task for a taken key
        again = await store.add_task(NewTask("late", source_key="key-7", dedup=scope))
        assert not again.created
        assert len(await all_tasks(store)) == 100
    finally:
        await store.close()
