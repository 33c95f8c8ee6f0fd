"""A database file written by schema v1 (before retention) opens, is upgraded in
place to the current schema with every row kept, and can then be pruned; one
written by v6 (its cost archive without the account) keeps its archive's totals."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.store import archive_upgrade
from tests.store.contract import new, success
from vigil.clock import ManualClock
from vigil.models import DedupScope, TaskStatus
from vigil.store import CostGroup
from vigil.store.sqlite import SqliteStore
from vigil.store.sqlite.schema import MIGRATIONS, SCHEMA_VERSION, V1

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
        conn.execute("INSERT INTO sensor_state (name, last_run_at, last_status) VALUES ('feeds', ?1, 'ok')", (now,))
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
        assert _user_version(path) == SCHEMA_VERSION == 12
        assert [t.subject for t in await store.list_tasks()] == ["open", "old work"]
        (feeds,) = await store.sensor_states()
        assert (feeds.last_run_at, feeds.skips) == (start, ())  # v5: no runs skipped yet
        assert await store.spend_since(0) == 1.5
        before = await store.cost_rollup(since_ms=0, by=CostGroup.SENSOR)
        # the upgraded file works as a new one: run the open task, then prune the old one
        clock.advance(DAY_MS)
        claimed = await store.claim_next(worker="w", lease_ms=60_000)
        assert claimed is not None
        await store.record(claimed, success(cost_usd=0.5), worker="w")
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


async def test_the_waiting_status_rebuild_keeps_rows_links_counts_and_the_id_sequence(tmp_path: Path) -> None:
    """V6 rebuilds ``tasks`` (a new status in its CHECK): a v5 file's tasks, runs,
    notes, events and dependencies survive with their ids, foreign keys still
    cascade, the status counts are right, and a deleted task's id is not reused."""
    path = tmp_path / "data" / "vigil.db"
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("BEGIN")
    for statement in [s for migration in MIGRATIONS[:5] for s in migration]:
        assert isinstance(statement, str)
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 5")
    for subject in ("first", "second", "third"):
        conn.execute(
            "INSERT INTO tasks (subject, scheduled_for, created_at, updated_at, updated_by) VALUES (?, 1, 1, 1, 'h')",
            (subject,),
        )
    conn.execute("INSERT INTO task_deps (task_id, depends_on) VALUES (2, 1)")
    conn.execute("INSERT INTO runs (task_id, attempt, started_at, outcome) VALUES (1, 1, 1, 'failed')")
    conn.execute("INSERT INTO notes (task_id, at, author, text) VALUES (1, 1, 'human', 'kept')")
    conn.execute("DELETE FROM tasks WHERE id = 3")
    conn.execute("COMMIT")
    conn.close()

    async with await SqliteStore.open(path, clock=ManualClock()) as store:
        assert [t.id for t in await store.list_tasks()] == [2, 1]
        assert (await store.get_task(2)).waiting_on == 1
        assert [r.outcome for r in await store.list_runs(1)] == ["failed"]
        assert [n.text for n in await store.list_notes(1)] == ["kept"]
        assert [e.kind for e in await store.list_events(1)] == ["created"]
        added = await store.add_task(new("fourth"))
        assert added.task_id == 4  # 3 was used once: never again
        counts = await store.count_by_status()
        assert (counts[TaskStatus.PENDING], counts[TaskStatus.WAITING]) == (3, 0)
        assert await store.integrity_check() == "ok"
    check = sqlite3.connect(path)
    try:
        check.execute("PRAGMA foreign_keys = ON")
        assert check.execute("PRAGMA foreign_key_check").fetchall() == []
        check.execute("DELETE FROM tasks WHERE id = 1")  # still cascades into runs and notes
        assert check.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
        assert check.execute("SELECT count(*) FROM notes").fetchone()[0] == 0
        check.rollback()
    finally:
        check.close()


def _v8_file(path: Path, archived: list[tuple[object, ...]]) -> None:
    """A v8 database whose cost archive holds ``archived`` (``archive_upgrade.COLUMNS``)."""
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for statements in MIGRATIONS[:8]:
            for statement in statements:
                if callable(statement):
                    statement(conn)
                else:
                    conn.execute(statement)
        conn.execute("PRAGMA user_version = 8")
        values = ", ".join("?" * len(archived[0]))
        conn.executemany(f"INSERT INTO cost_archive ({archive_upgrade.COLUMNS}) VALUES ({values})", archived)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _query(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


async def test_a_v8_archive_is_rebuilt_with_the_account_and_keeps_its_totals(tmp_path: Path) -> None:
    """V9 rebuilds the archive (a WITHOUT ROWID table) with the account in its key:
    the rows move over as '(none)', with every sum, and the hour index is back."""
    path = tmp_path / "data" / "vigil.db"
    clock = ManualClock()
    _v8_file(path, archive_upgrade.rows_before(clock.now_ms()))
    sums = _query(path, archive_upgrade.SQL_SUMS)

    async with await SqliteStore.open(path, clock=clock) as store:
        assert _user_version(path) == SCHEMA_VERSION == 12
        assert _query(path, archive_upgrade.SQL_SUMS) == sums
        assert _query(path, archive_upgrade.SQL_NOT_NONE) == [(0,)]
        await archive_upgrade.assert_upgraded_archive_counts(store, clock)
        assert await store.integrity_check() == "ok"
    key = _query(path, "SELECT name FROM pragma_table_info('cost_archive') WHERE pk > 0 ORDER BY pk")
    assert [name for (name,) in key] == ["start_ms", "span_ms", "skills", "source", "model", "sensor", "account"]
    assert _query(path, "SELECT type, name FROM sqlite_master WHERE tbl_name = 'cost_archive' ORDER BY name") == [
        ("table", "cost_archive"),
        ("index", "ix_cost_archive_hours"),
    ]
    assert _query(path, "SELECT sql LIKE '%) WITHOUT ROWID%' FROM sqlite_master WHERE name = 'cost_archive'") == [(1,)]


async def test_a_v11_file_gets_the_runs_price_source_and_keeps_its_runs(tmp_path: Path) -> None:
    """V12 adds ``runs.priced_by``: a run recorded before has none; a run recorded
    after says what priced it."""
    path = tmp_path / "data" / "vigil.db"
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for statements in MIGRATIONS[:11]:
            for statement in statements:
                statement(conn) if callable(statement) else conn.execute(statement)
        conn.execute("PRAGMA user_version = 11")
        conn.execute("COMMIT")
    finally:
        conn.close()
    clock = ManualClock()
    async with await SqliteStore.open(path, clock=clock) as store:
        assert _user_version(path) == SCHEMA_VERSION == 12
        for subject, priced_by in (("before", None), ("after", "tokens: gpt-7 at the gpt family's price")):
            await store.add_task(new(subject))
            claim = await store.claim_next(worker="w", lease_ms=60_000)
            assert claim is not None
            await store.record(claim, success(cost_usd=0.25, priced_by=priced_by), worker="w")
            (run,) = await store.list_runs(claim.task.id)
            assert (run.cost_usd, run.priced_by) == (0.25, priced_by)
