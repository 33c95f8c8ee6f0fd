"""A database file written by schema v1 (before retention) opens, is upgraded in
place to the current schema with every row kept, and can then be pruned."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.store.contract import new, success
from vigil.clock import ManualClock
from vigil.models import DedupScope, TaskStatus
from vigil.store import CostGroup
from vigil.store.sqlite import SqliteStore
from vigil.store.sqlite_schema import SCHEMA_VERSION, V1

DAY_MS = 86_400_000


def _v1_file(path: Path, now: int) -> None:
    """A v1 database as the released Vigil left it: one finished task with a run
    (an ``ever`` key), one pending task."""
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN")
        for statement in V1:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            """INSERT INTO tasks (subject, source, source_key, dedup, status, scheduled_for, created_at,
                                  updated_at, updated_by, completed_at, attempt_count, cost_usd)
               VALUES ('old work', 'sensor:feeds', 'entry-1', 'ever', 'completed', ?1, ?1, ?1, 'dispatcher',
                       ?1, 1, 1.5)""",
            (now,),
        )
        conn.execute(
            """INSERT INTO runs (task_id, attempt, started_at, finished_at, outcome, cost_usd, tokens_in, model)
               VALUES (1, 1, ?1, ?1, 'success', 1.5, 300, 'sonnet')""",
            (now,),
        )
        conn.execute(
            """INSERT INTO tasks (subject, scheduled_for, created_at, updated_at, updated_by)
               VALUES ('open', ?1, ?1, ?1, 'human')""",
            (now,),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def _user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


async def test_a_v1_file_is_upgraded_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "data" / "vigil.db"
    clock = ManualClock()
    start = clock.now_ms()
    _v1_file(path, start)
    assert _user_version(path) == 1

    async with await SqliteStore.open(path, clock=clock) as store:
        assert _user_version(path) == SCHEMA_VERSION == 5
        assert [t.subject for t in await store.list_tasks()] == ["open", "old work"]
        assert await store.spend_since(0) == 1.5
        before = await store.cost_rollup(since_ms=0, by=CostGroup.SENSOR)
        # the upgraded file works as a new one: run the open task, then prune the old one
        clock.advance(DAY_MS)
        claimed = await store.claim_next(worker="w", lease_ms=60_000)
        assert claimed is not None
        await store.finish(claimed, success(cost_usd=0.5), TaskStatus.COMPLETED, worker="w")
        result = await store.prune(finished_before_ms=start + 1)
        assert result.tasks == 1
        assert await store.spend_since(0) == 2.0
        after = await store.cost_rollup(since_ms=0, by=CostGroup.SENSOR)
        assert [(r.key, r.runs, r.cost_usd) for r in after] == [("feeds", 1, 1.5), ("(none)", 1, 0.5)]
        assert (before[0].key, before[0].runs, before[0].cost_usd) == ("feeds", 1, 1.5)
        # the pruned task's ever key stays used
        again = await store.add_task(new("old work again", source_key="entry-1", dedup=DedupScope.EVER))
        assert not again.created
        assert await store.integrity_check() == "ok"


async def test_opening_an_upgraded_file_again_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "data" / "vigil.db"
    _v1_file(path, ManualClock().now_ms())
    async with await SqliteStore.open(path, clock=ManualClock()):
        pass
    schema = _schema(path)
    async with await SqliteStore.open(path, clock=ManualClock()) as store:
        assert len(await store.list_tasks()) == 2
    assert _schema(path) == schema
    assert _user_version(path) == SCHEMA_VERSION


def _schema(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return [(str(n), str(s)) for n, s in conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name")]
    finally:
        conn.close()
