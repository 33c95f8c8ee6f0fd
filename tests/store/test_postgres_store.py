"""PostgreSQL: opening (a down server, a refused login, a wrong URL, a newer schema,
another program's database), change notifications behind ``data_version``, and the
maintenance calls that belong to SQLite."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import psycopg
import pytest

from tests.postgres_server import with_database
from tests.store import archive_upgrade
from tests.store.contract import new, success
from vigil.clock import ManualClock
from vigil.errors import OperationError, SchemaTooNew, StoreBusy, StoreError
from vigil.models import TaskStatus
from vigil.store.postgres import PostgresStore
from vigil.store.postgres import db as postgres_db
from vigil.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION

SECRET = "s3cret-pw-4711"
WAIT_S = 30.0  # a safety net only: notifications normally arrive in milliseconds


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _one_line_without_secret(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text
    assert SECRET not in text
    return text


async def test_a_server_that_is_down_is_one_line_naming_host_port_and_database() -> None:
    port = _free_port()
    with pytest.raises(StoreError) as refused:
        await PostgresStore.open(f"postgresql://vigil:{SECRET}@127.0.0.1:{port}/queue")
    text = _one_line_without_secret(refused.value)
    assert f"127.0.0.1:{port}/queue" in text
    assert "not running" in text or "refused" in text


async def test_a_refused_login_is_one_line(postgres_url: str) -> None:
    url = postgres_url.replace("postgresql://vigil@", f"postgresql://nobody_here:{SECRET}@")
    with pytest.raises(StoreError) as refused:
        await PostgresStore.open(url)
    assert "refused" in _one_line_without_secret(refused.value) or "does not exist" in str(refused.value)


async def test_a_missing_database_is_one_line(postgres_url: str) -> None:
    with pytest.raises(StoreError) as refused:
        await PostgresStore.open(with_database(postgres_url, "no_such_vigil_db"))
    assert "does not exist" in _one_line_without_secret(refused.value)


async def test_a_malformed_url_is_one_line() -> None:
    with pytest.raises(StoreError) as refused:
        await PostgresStore.open(f"postgresql://vigil:{SECRET}@127.0.0.1:notaport/db")
    _one_line_without_secret(refused.value)


async def test_a_newer_schema_is_refused_and_left_alone(postgres_url: str) -> None:
    store = await PostgresStore.open(postgres_url)
    await store.add_task(new("kept"))
    await store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE vigil_schema SET version = %s", (SCHEMA_VERSION + 1,))

    with pytest.raises(SchemaTooNew) as refused:
        await PostgresStore.open(postgres_url)

    assert "newer" in _one_line_without_secret(refused.value)
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT version FROM vigil_schema").fetchone() == (SCHEMA_VERSION + 1,)
        assert conn.execute("SELECT subject FROM tasks").fetchall() == [("kept",)]


async def test_another_programs_database_is_refused_and_left_alone(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE tasks (title text)")

    with pytest.raises(StoreError) as refused:
        await PostgresStore.open(postgres_url)

    assert "not a Vigil database" in _one_line_without_secret(refused.value)
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT to_regclass('vigil_schema')").fetchone() == (None,)


async def test_processes_opening_a_new_database_at_once_migrate_it_once(postgres_url: str) -> None:
    opened = await asyncio.gather(*(PostgresStore.open(postgres_url) for _ in range(4)), return_exceptions=True)
    stores = [s for s in opened if isinstance(s, PostgresStore)]
    try:
        assert stores == opened
        assert [(await s.add_task(new("t", source_key="k"))).task_id for s in stores] == [1, 1, 1, 1]
    finally:
        for s in stores:
            await s.close()
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT version FROM vigil_schema").fetchone() == (SCHEMA_VERSION,)


async def _moved_from(store: PostgresStore, version: int) -> int:
    """The store's data_version once it differs from ``version``."""
    async with asyncio.timeout(WAIT_S):
        while (now := await store.data_version()) == version:
            await asyncio.sleep(0.01)
    return now


async def test_data_version_moves_on_another_sessions_commit_not_on_its_own(
    postgres_url: str, clock: ManualClock
) -> None:
    mine = await PostgresStore.open(postgres_url, clock=clock)
    other = await PostgresStore.open(postgres_url, clock=clock)
    try:
        start = await mine.data_version()
        assert await mine.data_version() == start  # nothing committed: it stays
        await mine.add_task(new("my own"))
        await mine.set_loop_values({"heartbeat": 1})
        await other.add_task(new("from elsewhere"))

        moved = await _moved_from(mine, start)

        # Notifications arrive in commit order: had this store's own commits counted,
        # they would have moved it before the other's did.
        assert moved == start + 1
        for change in (other.set_loop_values({"gate": "x"}), other.set_sensor_enabled("feeds", False)):
            before = await mine.data_version()
            await change
            await _moved_from(mine, before)
    finally:
        await mine.close()
        await other.close()


async def test_checkpoint_is_nothing_and_backup_points_to_pg_dump(postgres_url: str, tmp_path: Path) -> None:
    store = await PostgresStore.open(postgres_url)
    try:
        assert await store.checkpoint() == (0, 0)
        with pytest.raises(OperationError) as refused:
            await store.backup(tmp_path / "copy.db")
        assert "pg_dump" in _one_line_without_secret(refused.value)
        assert not (tmp_path / "copy.db").exists()
    finally:
        await store.close()


def _listening_sessions(url: str, terminate: bool = False) -> int:
    """How many sessions of this database listen for changes (ended if ``terminate``)."""
    with psycopg.connect(url, autocommit=True) as conn:
        pick = "pg_terminate_backend(pid)" if terminate else "pid"
        rows = conn.execute(
            f"SELECT {pick} FROM pg_stat_activity WHERE datname = current_database() AND query = %s",
            ("LISTEN vigil_changes",),
        ).fetchall()
    return len(rows)


async def test_a_lost_listening_session_is_replaced_and_changes_are_not_missed(
    postgres_url: str, clock: ManualClock
) -> None:
    mine = await PostgresStore.open(postgres_url, clock=clock)
    other = await PostgresStore.open(postgres_url, clock=clock)
    try:
        before = await mine.data_version()
        assert await asyncio.to_thread(_listening_sessions, postgres_url, True) == 2  # both stores' sessions end

        # Down or just back: either way the counter has moved, so a caller re-reads.
        await _moved_from(mine, before)
        async with asyncio.timeout(WAIT_S):
            while await asyncio.to_thread(_listening_sessions, postgres_url) < 2:
                await asyncio.sleep(0.05)
            while (steady := await mine.data_version()) != await mine.data_version():
                await asyncio.sleep(0.05)  # moving on every call: not listening yet
        await other.add_task(new("after the reconnect"))
        await _moved_from(mine, steady)
    finally:
        await mine.close()
        await other.close()


def _end_pooled_sessions(url: str) -> int:
    """End every session of this database but the listening ones (as a server
    restart or an administrator would)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
               WHERE datname = current_database() AND pid <> pg_backend_pid() AND query <> %s""",
            ("LISTEN vigil_changes",),
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_sessions_the_server_ended_are_replaced_before_reads_and_idle_writes(
    postgres_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await PostgresStore.open(postgres_url, clock=clock)
    try:
        await store.add_task(new("before"))
        assert await asyncio.to_thread(_end_pooled_sessions, postgres_url) >= 1
        # Used a moment ago, so not probed: the read meets the dead session, which
        # the pool replaces, and is tried again.
        assert (await store.count_by_status())[TaskStatus.PENDING] == 1

        # Sessions idle past the probe threshold (here: any) are probed before use,
        # so a write after a server restart finds a live session.
        monkeypatch.setattr(postgres_db, "IDLE_PROBE_S", 0.0)
        await asyncio.to_thread(_end_pooled_sessions, postgres_url)
        await store.add_task(new("after"))
        assert {t.subject for t in await store.list_tasks()} == {"before", "after"}
    finally:
        await store.close()


async def test_a_row_locked_elsewhere_is_busy_not_a_hang(postgres_url: str) -> None:
    """A session that keeps a task's row locked (a person's open transaction in
    psql) makes a write wait ``busy_timeout``, be retried, then fail as
    ``StoreBusy`` in one line; once the lock is gone the same write goes through."""
    async with await PostgresStore.open(postgres_url, busy_timeout_ms=50) as store:
        added = await store.add_task(new("held"))
        assert added.task_id is not None
        with psycopg.connect(postgres_url) as holder:
            holder.execute("SELECT id FROM tasks WHERE id = %s FOR UPDATE", (added.task_id,))
            with pytest.raises(StoreBusy) as busy:  # wait_for: without the timeout it would hang
                await asyncio.wait_for(store.cancel(added.task_id, actor="human"), WAIT_S)
            assert "\n" not in str(busy.value)
            assert (await store.get_task(added.task_id)).status is TaskStatus.PENDING
            holder.rollback()
        canceled = await store.cancel(added.task_id, actor="human")
        assert canceled.status is TaskStatus.CANCELED


def _migrate_to(url: str, version: int) -> None:
    """Apply the first ``version`` migrations to a new database, as that Vigil did."""
    with psycopg.connect(url, autocommit=True) as conn:
        for number, statements in enumerate(MIGRATIONS[:version], start=1):
            with conn.transaction():
                for statement in statements:
                    conn.execute(statement)
                conn.execute("UPDATE vigil_schema SET version = %s", (number,))


async def test_counts_kept_per_session_slot_by_v6_are_summed_into_one_row_per_status(postgres_url: str) -> None:
    """V7 merges V1's per-session count slots: a database whose tasks were written by
    several sessions keeps its status counts across the upgrade."""
    _migrate_to(postgres_url, 6)
    statuses = ["pending", "pending", "blocked", "completed", "failed", "completed", "pending"]
    for status in statuses:  # one session each: the counts land in several slots
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO tasks (subject, status, scheduled_for, created_at, updated_at, updated_by)"
                " VALUES ('t', %s, 0, 0, 0, 'human')",
                (status,),
            )
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(DISTINCT slot) FROM status_counts WHERE n > 0").fetchone()[0] > 1  # type: ignore[index]

    store = await PostgresStore.open(postgres_url)
    try:
        counts = await store.count_by_status()
    finally:
        await store.close()

    assert {status: n for status, n in counts.items() if n} == {"pending": 3, "blocked": 1, "completed": 2, "failed": 1}
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM status_counts").fetchone() == (len(TaskStatus),)
        assert conn.execute("SELECT version FROM vigil_schema").fetchone() == (SCHEMA_VERSION,)


async def test_a_v10_archive_gets_the_account_in_its_key_and_keeps_its_totals(postgres_url: str) -> None:
    """V11 adds the account to the cost archive's key: the rows there are '(none)',
    with every sum."""
    _migrate_to(postgres_url, 10)
    clock = ManualClock()
    archived = archive_upgrade.rows_before(clock.now_ms())
    values = ", ".join("%s::jsonb" if column == "skills" else "%s" for column in archive_upgrade.COLUMNS.split(", "))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.cursor().executemany(
            f"INSERT INTO cost_archive ({archive_upgrade.COLUMNS}) VALUES ({values})",
            archived,
        )
        sums = conn.execute(archive_upgrade.SQL_SUMS).fetchall()

    store = await PostgresStore.open(postgres_url, clock=clock)
    try:
        with psycopg.connect(postgres_url) as conn:
            assert conn.execute("SELECT version FROM vigil_schema").fetchone() == (SCHEMA_VERSION,) == (14,)
            assert conn.execute(archive_upgrade.SQL_SUMS).fetchall() == sums
            assert conn.execute(archive_upgrade.SQL_NOT_NONE).fetchall() == [(0,)]
            key = conn.execute(
                "SELECT a.attname FROM pg_index i CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k (attnum, n)"
                " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
                " WHERE i.indrelid = 'cost_archive'::regclass AND i.indisprimary ORDER BY k.n"
            ).fetchall()
            assert [name for (name,) in key] == [
                "start_ms",
                "span_ms",
                "skills",
                "source",
                "model",
                "sensor",
                "account",
            ]
        await archive_upgrade.assert_upgraded_archive_counts(store, clock)
    finally:
        await store.close()


async def test_a_v13_database_gets_the_runs_price_source(postgres_url: str) -> None:
    """V14 adds ``runs.priced_by``, as SQLite's V12."""
    _migrate_to(postgres_url, 13)
    store = await PostgresStore.open(postgres_url, clock=ManualClock())
    try:
        await store.add_task(new("priced"))
        claim = await store.claim_next(worker="w", lease_ms=60_000)
        assert claim is not None
        await store.record(claim, success(cost_usd=0.5, priced_by="Claude Code's total_cost_usd"), worker="w")
        (run,) = await store.list_runs(claim.task.id)
        assert (run.cost_usd, run.priced_by) == (0.5, "Claude Code's total_cost_usd")
    finally:
        await store.close()
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT version FROM vigil_schema").fetchone() == (SCHEMA_VERSION,) == (14,)
