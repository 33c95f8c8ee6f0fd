"""Query plans with a million finished tasks (and their runs) and 10,000 urgent tasks
not yet due.

The queries the dispatcher, the TUI and the CLI run on every tick must stay off full
scans of ``tasks`` as the history grows. The table is filled with raw SQL (the store
would take minutes to add a million tasks one transaction at a time); the plans are
read through ``SqliteStore.explain`` with the queries the store really runs.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import pytest

from tests.store.contract import new
from tests.store.plans import sqlite_plan
from vigil.clock import MS_PER_DAY, ManualClock
from vigil.models import TaskStatus
from vigil.store import CostGroup
from vigil.store.sql.costs import COST_ROLLUP, SPEND_SINCE
from vigil.store.sql.runs import CLAIM, NEXT_DUE_AT, OPEN_RUNS
from vigil.store.sql.tasks import (
    ADD_TASK,
    ADD_TASK_EVER,
    COUNT_BY_STATUS,
    COUNT_CHILDREN,
    COUNT_SOURCE_SINCE,
    EVENTS_AFTER,
    FOLLOW_UP_DEPTH,
    HOLDER_OF_KEY,
    list_tasks,
)
from vigil.store.sql.window import QUEUE
from vigil.store.sqlite import SqliteStore
from vigil.store.transaction import Sql

pytestmark = pytest.mark.slow

FINISHED = 1_000_000
NOT_YET_DUE = 10_000
# A walk of a whole table (by name or by the queries' aliases t, p, r) or of a full
# index; the partial indexes over active, pending or open rows only are small by
# construction and may be walked.
FULL_SCAN = re.compile(
    r"^SCAN (tasks|runs|t|p|r)\b(?! USING (COVERING )?INDEX (ix_tasks_claim|ix_tasks_active|ix_runs_open)\b)"
)
MS_PER_TASK = 1000  # the history: one task finished per second, for about 11.6 days


def _fill(path: Path, now: int) -> None:
    """Add the history and the future tasks in one transaction, triggers included."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        # A private bulk load: no other connection is open, so durability can wait.
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        conn.execute(
            """WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < :count - 1)
               INSERT INTO tasks (subject, status, priority, source, source_key, scheduled_for,
                                  created_at, updated_at, updated_by, completed_at)
               SELECT 'done ' || i, CASE i % 10 WHEN 0 THEN 'failed' WHEN 1 THEN 'canceled' ELSE 'completed' END,
                      1 + i % 9, 'sensor:feed', 'entry-' || i, :t + i * :step, :t + i * :step, :t + i * :step,
                      'test', :t + i * :step + 1
               FROM n""",
            {"count": FINISHED, "t": now - MS_PER_TASK * FINISHED - 1, "step": MS_PER_TASK},
        )
        conn.execute(
            """INSERT INTO runs (task_id, attempt, started_at, finished_at, outcome, cost_usd, model)
               SELECT id, 1, created_at, completed_at, 'success', 0.01, 'opus' FROM tasks"""
        )
        conn.execute(
            """WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < :count - 1)
               INSERT INTO tasks (subject, priority, source, scheduled_for, created_at, updated_at, updated_by)
               SELECT 'urgent, later ' || i, 1, 'human', :now + 60000 + i, :now, :now, 'test' FROM n""",
            {"count": NOT_YET_DUE, "now": now},
        )
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()


@pytest.fixture(scope="module")
def big_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A migrated database holding the big history; shared by this module's tests."""
    path = tmp_path_factory.mktemp("big") / "vigil.db"
    now = ManualClock().now_ms()

    async def migrate() -> None:
        await (await SqliteStore.open(path, clock=ManualClock(now))).close()

    asyncio.run(migrate())
    _fill(path, now)
    return path, now


@pytest.fixture
async def big_store(big_db: tuple[Path, int]) -> AsyncIterator[tuple[SqliteStore, ManualClock]]:
    path, now = big_db
    clock = ManualClock(now)
    async with await SqliteStore.open(path, clock=clock) as store:
        yield store, clock


def _queries(now: int) -> dict[str, tuple[Sql, Mapping[str, object] | Sequence[object]]]:
    add = {
        "subject": "s",
        "description": "",
        "skills": "[]",
        "priority": 5,
        "source": "human",
        "source_key": "entry-77",
        "dedup": "open",
        "parent_id": None,
        "scheduled_for": now,
        "now": now,
        "actor": "human",
        "max_retries": 3,
        "approval": False,
        "model": None,
        "workdir": None,
        "max_cost_usd": None,
        "code": None,
        "github": None,
    }
    return {
        "claim_next": (
            CLAIM,
            {"now": now, "worker": "w", "lease_until": now + 1, "executor": None, "max_priority": 9, "anyone": True},
        ),
        # over the budget: the urgent levels only, each candidate's priority setter by its audit rows' index
        "claim_next by a person": (
            CLAIM,
            {"now": now, "worker": "w", "lease_until": now + 1, "executor": None, "max_priority": 1, "anyone": False},
        ),
        "next_due_at": (NEXT_DUE_AT, {}),
        "queue": (QUEUE, {"now": now, "limit": 200}),
        "list_tasks completed": (list_tasks([TaskStatus.COMPLETED]), {"before_id": 2**62, "limit": 50}),
        "list_tasks pending, page 2": (list_tasks([TaskStatus.PENDING]), {"before_id": FINISHED + 500, "limit": 50}),
        "list_tasks every status": (list_tasks(list(TaskStatus)), {"before_id": 2**62, "limit": 50}),
        "count_by_status": (COUNT_BY_STATUS, {}),
        "add_task dedup open": (ADD_TASK, add),
        "add_task dedup ever": (ADD_TASK_EVER, add),
        "holder of a key": (HOLDER_OF_KEY, {"key": "entry-77"}),
        "events after an id (vigil events)": (
            EVENTS_AFTER,
            {"after": FINISHED, "since": now - 3_600_000, "task": None, "kinds": '["status"]', "limit": 500},
        ),
        "open runs (recovery)": (OPEN_RUNS, {}),
        "spend in the last day (budget)": (SPEND_SINCE, {"since": now - MS_PER_DAY}),
        "tasks of a source in the last hour (flood limit)": (
            COUNT_SOURCE_SINCE,
            {"source": "sensor:feed", "since": now - 3_600_000, "cap": 100},
        ),
        "children of a task (flood limit)": (COUNT_CHILDREN, {"parent_id": 77, "cap": 100}),
        "follow-up depth (flood limit)": (FOLLOW_UP_DEPTH, {"parent_id": 77, "max_depth": 5}),
        **{
            f"cost by {group} for the last day": (COST_ROLLUP[group], {"since": now - MS_PER_DAY})
            for group in CostGroup
        },
    }


async def _assert_no_full_scan(store: SqliteStore, now: int) -> None:
    for name, (sql, params) in _queries(now).items():
        plan = await sqlite_plan(store, sql, params)
        scans = [step for step in plan if FULL_SCAN.match(step)]
        assert not scans, f"{name} scans a whole table: {plan}"
        if name == "claim_next by a person":
            assert any("ix_task_events_task" in step for step in plan), f"{name}: {plan}"
        if name in ("claim_next", "claim_next by a person", "next_due_at"):
            assert any("ix_tasks_claim" in step for step in plan), f"{name}: {plan}"
        if name == "claim_next":
            # One bounded seek per priority, in order: no sort of the pending tasks.
            assert not any("TEMP B-TREE" in step for step in plan), f"{name}: {plan}"
            assert any("priority=? AND scheduled_for<?" in step for step in plan), f"{name}: {plan}"
        if name == "holder of a key":
            # A sensor may reuse one key every run: its finished tasks must not be sorted.
            assert not any("TEMP B-TREE" in step for step in plan), f"{name}: {plan}"


async def test_hot_queries_use_indexes_with_a_big_history(big_store: tuple[SqliteStore, ManualClock]) -> None:
    store, clock = big_store
    counts = await store.count_by_status()
    assert counts[TaskStatus.COMPLETED] + counts[TaskStatus.FAILED] + counts[TaskStatus.CANCELED] == FINISHED
    assert counts[TaskStatus.PENDING] >= NOT_YET_DUE
    await _assert_no_full_scan(store, clock.now_ms())


async def test_plans_hold_after_analyze(big_store: tuple[SqliteStore, ManualClock]) -> None:
    """Statistics (``ANALYZE`` / ``PRAGMA optimize``) must not lead the planner to a scan."""
    store, clock = big_store
    await store._db.write(lambda conn: conn.execute("ANALYZE"))
    stats = await store._db.read(lambda conn: conn.execute("SELECT count(*) FROM sqlite_stat1").fetchone()[0])
    assert stats > 0
    await _assert_no_full_scan(store, clock.now_ms())


async def test_claim_finds_the_right_task_among_them(big_store: tuple[SqliteStore, ManualClock]) -> None:
    store, clock = big_store
    now = clock.now_ms()
    assert await store.next_due_at() == now + 60_000
    assert await store.claim_next(worker="w", lease_ms=1000) is None
    low = await store.add_task(new("due, low", priority=7, scheduled_for=now - 10))
    high = await store.add_task(new("due, high", priority=3, scheduled_for=now))
    await store.add_task(new("due later, high", priority=3, scheduled_for=now + 1))
    assert await store.next_due_at() == now - 10
    order = []
    while (claim := await store.claim_next(worker="w", lease_ms=1000)) is not None:
        order.append(claim.task.id)
    assert order == [high.task_id, low.task_id]
    listed = await store.list_tasks(statuses=[TaskStatus.ACTIVE])
    assert [t.id for t in listed] == [high.task_id, low.task_id]
    assert (await store.queue(limit=3))[0].id == low.task_id
