"""PostgreSQL: dispatchers on separate connections claim at once and never get the
same task; the claim's plan seeks an index instead of sorting the pending set, with a
long history and many urgent tasks not yet due."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import AsyncIterator

import psycopg
import pytest

from tests.store.contract import new, success
from tests.store.plans import postgres_plan
from vigil.clock import ManualClock
from vigil.models import Claim, NewTask, TaskStatus
from vigil.store.postgres import PostgresStore
from vigil.store.sql.runs import CLAIM, NEXT_DUE_AT
from vigil.store.sql.tasks import list_tasks

DISPATCHERS = 6
TASKS = 300


@pytest.fixture
async def stores(postgres_migrated_url: str, clock: ManualClock) -> AsyncIterator[list[PostgresStore]]:
    """One store (its own pool and sessions) per dispatcher, as on separate hosts."""
    opened = [await PostgresStore.open(postgres_migrated_url, clock=clock) for _ in range(DISPATCHERS)]
    yield opened
    for store in opened:
        await store.close()


async def _drain(store: PostgresStore, worker: str) -> list[Claim]:
    """Claim and record until nothing is due, as the dispatch loop does."""
    claims: list[Claim] = []
    current = await store.claim_next(worker=worker, lease_ms=60_000)
    while current is not None:
        claims.append(current)
        await store.record(current, success(), worker=worker)
        current = await store.claim_next(worker=worker, lease_ms=60_000)
    return claims


async def test_concurrent_claimers_never_get_the_same_task(stores: list[PostgresStore]) -> None:
    first = stores[0]
    added = await first.add_tasks([new(f"t{i}", priority=1 + i % 9) for i in range(TASKS)], actor="human")
    assert added.created == TASKS

    per_worker = await asyncio.gather(*(_drain(s, f"w{n}") for n, s in enumerate(stores)))

    claimed = Counter(c.task.id for claims in per_worker for c in claims)
    assert set(claimed) == set(added.created_ids)
    assert max(claimed.values()) == 1
    counts = await first.count_by_status()
    assert (counts[TaskStatus.COMPLETED], counts[TaskStatus.PENDING], counts[TaskStatus.ACTIVE]) == (TASKS, 0, 0)
    for task_id in added.created_ids[:20]:
        runs = await first.list_runs(task_id)
        assert [r.attempt for r in runs] == [1]


async def test_a_claim_skips_a_task_another_session_holds_locked(stores: list[PostgresStore]) -> None:
    """SKIP LOCKED: a dispatcher does not wait behind another's claim; it takes the
    next task at once."""
    a, b = stores[0], stores[1]
    await a.add_task(new("most urgent", priority=1))
    await a.add_task(new("next", priority=2))
    first = await a.claim_next(worker="wa", lease_ms=60_000)
    second = await b.claim_next(worker="wb", lease_ms=60_000)
    assert first is not None
    assert second is not None
    assert (first.task.subject, second.task.subject) == ("most urgent", "next")
    assert await b.claim_next(worker="wb", lease_ms=60_000) is None


# --- the plan -----------------------------------------------------------------------

FINISHED = 200_000
NOT_YET_DUE = 10_000


def _fill(url: str, now: int) -> None:
    """A history of finished tasks and many urgent tasks not yet due, by raw SQL
    (the store would take minutes to add them one transaction at a time)."""
    with psycopg.connect(url, autocommit=True) as conn:
        # Audit rows and counts are not what this test reads: load without triggers.
        conn.execute("ALTER TABLE tasks DISABLE TRIGGER USER")
        conn.execute(
            """INSERT INTO tasks (subject, status, priority, source, scheduled_for, created_at, updated_at,
                                  updated_by, completed_at)
               SELECT 'done ' || i, 'completed', 1 + i %% 9, 'sensor:feed', %(t)s + i, %(t)s + i, %(t)s + i,
                      'test', %(t)s + i + 1
               FROM generate_series(0, %(n)s - 1) AS i""",
            {"t": now - FINISHED - 10, "n": FINISHED},
        )
        conn.execute(
            """INSERT INTO tasks (subject, priority, scheduled_for, created_at, updated_at, updated_by)
               SELECT 'urgent, later ' || i, 1, %(now)s + 60000 + i, %(now)s, %(now)s, 'test'
               FROM generate_series(0, %(n)s - 1) AS i""",
            {"now": now, "n": NOT_YET_DUE},
        )
        conn.execute("ALTER TABLE tasks ENABLE TRIGGER USER")
        conn.execute("ANALYZE tasks")


@pytest.mark.slow
async def test_the_claim_seeks_the_claim_index_and_sorts_nothing(
    postgres_migrated_url: str, clock: ManualClock
) -> None:
    now = clock.now_ms()
    store = await PostgresStore.open(postgres_migrated_url, clock=clock)
    try:
        await asyncio.to_thread(_fill, postgres_migrated_url, now)
        due = await store.add_task(NewTask("due, not urgent", priority=7))
        params = {
            "now": now,
            "worker": "w",
            "lease_until": now + 1000,
            "executor": None,
            "max_priority": 9,
            "anyone": True,
        }

        plan = await postgres_plan(store, CLAIM, params)
        due_plan = await postgres_plan(store, NEXT_DUE_AT, {})
        open_statuses = (TaskStatus.PENDING, TaskStatus.ACTIVE, TaskStatus.BLOCKED)
        list_plan = await postgres_plan(store, list_tasks(open_statuses), {"before_id": 2**62, "limit": 50})

        text = "\n".join(plan)
        assert "Index Scan using ix_tasks_claim" in text, text
        # The due-time bound is part of the index seek: not-yet-due tasks are never read.
        assert re.search(r"Index Cond: .*scheduled_for <=", text), text
        # The open tasks are found by status, not by walking the history down the key.
        assert "tasks_pkey" not in "\n".join(list_plan), list_plan
        for lines in (plan, due_plan, list_plan):
            joined = "\n".join(lines)
            assert "Seq Scan on tasks" not in joined, joined
            assert not re.search(r"^\s*(->\s*)?Sort\s+\(", joined, re.MULTILINE), joined  # a Sort node
        claimed = await store.claim_next(worker="w", lease_ms=1000)
        assert claimed is not None
        assert claimed.task.id == due.task_id
    finally:
        await store.close()
