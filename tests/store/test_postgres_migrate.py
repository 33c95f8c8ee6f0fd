"""``vigil store migrate --to``: a SQLite home with tasks in every state moves onto an
empty PostgreSQL database; the real CLI then reports the same on both stores."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from dispatch.lock import DispatcherLock, lock_path_for
from tests.conftest import VigilRunner
from tests.reliability.support import run_vigil
from vigil.clock import ManualClock, SystemClock
from vigil.config import load_settings
from vigil.home import init_home
from vigil.models import (
    HEARTBEAT_KEY,
    DedupScope,
    DispatcherHeartbeat,
    NewTask,
    Outcome,
    OutcomeKind,
    SensorRun,
    TaskStatus,
)
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow

HOUR_MS = 3_600_000
SECRET = "migrate-pw"

# `vigil stats` over both stores: every grouping, as text and as JSON.
STATS = [
    ("stats",),
    ("stats", "--by", "skill"),
    ("stats", "--by", "source"),
    ("stats", "--by", "model"),
    ("stats", "--by", "sensor"),
    ("stats", "--json"),
    ("stats", "--by", "skill", "--json"),
]
ALL_STATUSES = ",".join(str(s) for s in TaskStatus)


async def _fill(path: Path) -> dict[str, int]:
    """Tasks in every state, with runs and costs on two days, notes, dependencies,
    sensor and loop state; returns the ids by what they are."""
    clock = ManualClock(SystemClock().now_ms() - 50 * HOUR_MS)
    ids: dict[str, int] = {}
    async with await SqliteStore.open(path, clock=clock) as store:

        async def add(name: str, **fields: object) -> int:
            result = await store.add_task(NewTask(f"the {name} task", **fields))  # type: ignore[arg-type]
            assert result.task_id is not None
            ids[name] = result.task_id
            return result.task_id

        async def run(name: str, status: TaskStatus, cost: float, model: str) -> None:
            claim = await store.claim_next(worker="w1", lease_ms=60_000)
            assert claim is not None
            assert claim.task.id == ids[name]
            outcome = Outcome(
                OutcomeKind.SUCCESS if status is TaskStatus.COMPLETED else OutcomeKind.FAILED,
                summary=f"{name} done",
                cost_usd=cost,
                api_cost_usd=cost * 1.5,
                tokens_in=int(cost * 10_000),
                tokens_out=int(cost * 1_000),
                cache_read_tokens=7,
                cache_write_tokens=3,
                model=model,
            )
            await store.record(claim, outcome, worker="w1")

        await add("completed", priority=1, skills=("research",), source="sensor:feeds", source_key="feed-1")
        await run("completed", TaskStatus.COMPLETED, 0.1234, "model-a")
        await add("follow-up", priority=1, parent_id=ids["completed"], skills=("research", "write"))
        await run("follow-up", TaskStatus.COMPLETED, 0.0567, "model-b")
        clock.advance(26 * HOUR_MS)  # a second day of runs
        await add("failed", priority=1, max_retries=0, skills=("code",))
        await run("failed", TaskStatus.FAILED, 0.4321, "model-a")
        await add("retried", priority=1, skills=("code",))
        await run("retried", TaskStatus.FAILED, 0.0099, "model-b")
        await store.retry(ids["retried"], actor="human")  # failed → pending, its run kept
        await store.set_priority(ids["retried"], 4, actor="human")
        await add("canceled", priority=3)
        await store.cancel(ids["canceled"], actor="human")
        await add("blocked", priority=3)
        await store.close_task(ids["blocked"], TaskStatus.BLOCKED, "needs a person", actor="agent")
        await add("awaiting approval", priority=3, requires_approval=True)
        await add("dependency", priority=5, source_key="dep", description="multi\nline\tand \\ backslash")
        await add("dependent", priority=5, depends_on=(ids["dependency"],), skills=("write",))
        await add("later", priority=2, scheduled_for=clock.now_ms() + 48 * HOUR_MS)
        await add("waiting", priority=1, source_key="asked")
        asking = await store.claim_next(worker="w2", lease_ms=600_000)
        assert asking is not None
        await store.ask(ids["waiting"], "staging or prod?", ["staging", "prod"], actor="agent")
        await store.record(asking, Outcome(OutcomeKind.SUCCESS, session_id="s-1"), worker="w2")
        await add("active", priority=1)
        claim = await store.claim_next(worker="w2", lease_ms=600_000)
        assert claim is not None
        assert claim.task.id == ids["active"]
        await store.add_note(ids["active"], "halfway there", author="agent")
        await store.add_note(ids["completed"], "a note with 'quotes' and ünïcode", author="human")
        started = clock.now_ms()
        sensor_run = SensorRun(started_at=started, duration_ms=120, status="ok", next_due_at=started + HOUR_MS)
        await store.record_sensor_run(
            "feeds", sensor_run, [NewTask("from the feed", source="sensor:feeds")], {"cursor": 42}
        )
        await store.set_sensor_enabled("inbox", False)
        await store.set_loop_values({"gate": {"state": "running"}, "note": "kept"})
    return ids


def _pg(url: str) -> dict[str, str]:
    return {"VIGIL_STORE_URL": url}


def _json(proc: subprocess.CompletedProcess[str]) -> object:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _listed(proc: subprocess.CompletedProcess[str]) -> object:
    """The tasks `vigil task list --json` lists."""
    listed = _json(proc)
    assert isinstance(listed, dict)
    return listed["tasks"]


def _with_password(url: str) -> str:
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{SECRET}@{host}"


@pytest.mark.timeout(300)
async def test_a_home_in_every_state_moves_over_and_reports_the_same(
    vigil: VigilRunner, home: Path, postgres_url: str
) -> None:
    ids = await _fill(load_settings(home).store.path)
    sqlite_tasks = _listed(vigil("task", "list", "--status", ALL_STATUSES, "--limit", "100", "--json"))
    assert isinstance(sqlite_tasks, list)
    assert {t["status"] for t in sqlite_tasks} == {str(s) for s in TaskStatus}
    # read before the move: the moved file refuses every reader afterwards
    on_sqlite = {args: vigil(*args, check=True).stdout for args in STATS}
    shown_names = ("completed", "retried", "active", "dependent", "awaiting approval", "canceled")
    shown = {name: _json(vigil("task", "show", str(ids[name]), "--json")) for name in shown_names}
    status_sqlite = _json(vigil("status", "--json"))

    # the server trusts local logins, so a password in the URL is accepted and must not show
    proc = vigil("store", "migrate", "--to", _with_password(postgres_url), check=True)
    out = proc.stdout
    assert SECRET not in out + proc.stderr
    for table in ("tasks", "runs", "task_events", "notes", "task_deps", "sensor_state", "loop_state"):
        assert f"  {table} " in out, out
    assert f"  tasks          {len(sqlite_tasks):>10,} rows" in out
    assert "verified: row counts and cost totals match" in out
    masked = _with_password(postgres_url).replace(SECRET, "***")
    assert f'  url = "{masked}"' in out

    pg = _pg(postgres_url)
    for args in STATS:
        assert vigil(*args, env=pg, check=True).stdout == on_sqlite[args], args
    assert "no runs" not in vigil("stats", env=pg, check=True).stdout

    # every task with every field, ids and statuses included
    assert _listed(vigil("task", "list", "--status", ALL_STATUSES, "--limit", "100", "--json", env=pg)) == sqlite_tasks
    # runs, notes, events (with their ids) and dependencies of the tasks that have them
    for name in shown_names:
        assert _json(vigil("task", "show", str(ids[name]), "--json", env=pg)) == shown[name]
    # the trigger-kept status counts, the sensors and the loop state
    status_pg = _json(vigil("status", "--json", env=pg))
    assert isinstance(status_sqlite, dict)
    assert isinstance(status_pg, dict)
    for key in ("queue", "sensors", "gate", "budget"):
        assert status_pg[key] == status_sqlite[key], key
    assert status_pg["store"] == {"backend": "postgresql", "at": postgres_url}

    # dependencies still hold: the dependent waits until its dependency completes
    queue = _listed(vigil("task", "list", "--json", env=pg))
    assert isinstance(queue, list)
    dependent = next(t for t in queue if t["id"] == ids["dependent"])
    assert dependent["status"] == "pending"

    # new ids continue after the copied ones
    added = _json(vigil("task", "add", "first on postgres", "--json", env=pg))
    assert isinstance(added, dict)
    assert added["id"] == max(t["id"] for t in sqlite_tasks) + 1

    # a second migrate into the now non-empty target (of another home: this one's file
    # is marked moved) is refused and changes nothing
    before = _listed(vigil("task", "list", "--status", ALL_STATUSES, "--limit", "100", "--json", env=pg))
    other = home.parent / "other-home"
    init_home(other)
    assert run_vigil(other, "task", "add", "another home's task").returncode == 0
    again = run_vigil(other, "store", "migrate", "--to", postgres_url)
    assert again.returncode == 2, again.stderr
    assert again.stderr.count("\n") == 1
    assert "Traceback" not in again.stderr
    assert "is not empty (rows in tasks" in again.stderr
    assert "nothing was copied" in again.stderr
    assert again.stdout == ""  # no "copying" line for a copy that never started
    assert _listed(vigil("task", "list", "--status", ALL_STATUSES, "--limit", "100", "--json", env=pg)) == before
    # and the other home's SQLite file is as it was: one task, not marked moved
    kept = _listed(run_vigil(other, "task", "list", "--json"))
    assert isinstance(kept, list)
    assert len(kept) == 1


def test_a_home_without_a_database_has_nothing_to_migrate(vigil: VigilRunner, postgres_url: str) -> None:
    proc = vigil("store", "migrate", "--to", postgres_url)
    assert proc.returncode == 1
    assert proc.stderr.startswith("vigil: error: no database at ")
    assert "nothing to migrate" in proc.stderr


def test_a_target_that_is_not_postgresql_is_refused(vigil: VigilRunner) -> None:
    vigil("task", "add", "stays here", check=True)
    proc = vigil("store", "migrate", "--to", "mysql://u:pw@db/vigil")
    assert proc.returncode == 2
    assert (
        proc.stderr == "vigil: error: --to: expected a postgresql:// or postgres:// URL, got 'mysql://u:***@db/vigil'\n"
    )


async def test_a_table_the_target_cannot_hold_stops_the_copy_before_anything_is_written(
    vigil: VigilRunner, home: Path, postgres_url: str
) -> None:
    await _fill(load_settings(home).store.path)
    # as if a newer schema had added a table with rows that PostgreSQL does not know
    conn = sqlite3.connect(load_settings(home).store.path)
    with conn:
        conn.execute("CREATE TABLE later_feature (id INTEGER PRIMARY KEY, what TEXT)")
        conn.execute("INSERT INTO later_feature (what) VALUES ('kept')")
    conn.close()
    proc = vigil("store", "migrate", "--to", postgres_url)
    assert proc.returncode == 1
    assert proc.stderr.startswith("vigil: error: ")
    assert "has no table 'later_feature'; this Vigil's PostgreSQL schema cannot hold it" in proc.stderr
    assert proc.stdout == ""
    assert _listed(vigil("task", "list", "--status", ALL_STATUSES, "--json", env=_pg(postgres_url))) == []


def test_verification_compares_rows_and_money() -> None:
    from vigil.errors import StoreError
    from vigil.store.sqlite.export import TableTotals
    from vigil.store.transfer import _verify

    want = TableTotals(3, {"cost_usd": 0.1 + 0.2, "tokens_in": 30.0})
    _verify("runs", want, TableTotals(3, {"cost_usd": 0.3, "tokens_in": 30.0}))  # summed in another order
    with pytest.raises(StoreError, match=r"runs has 2 rows, not 3; nothing was copied"):
        _verify("runs", want, TableTotals(2, want.sums))
    with pytest.raises(StoreError, match=r"runs\.cost_usd totals 0\.31, not 0\.3"):
        _verify("runs", want, TableTotals(3, {"cost_usd": 0.31, "tokens_in": 30.0}))


def test_progress_lines_for_long_tables() -> None:
    from vigil.store.transfer import BATCH_ROWS, PROGRESS_EVERY, progress_line

    assert PROGRESS_EVERY % BATCH_ROWS == 0  # batches land on every progress mark
    assert progress_line("tasks", BATCH_ROWS, 120_000) is None
    assert progress_line("tasks", PROGRESS_EVERY, 120_000) == "  tasks              50,000 of 120,000 rows…"
    assert progress_line("tasks", 120_000, 120_000) == "  tasks             120,000 rows"
    assert progress_line("notes", 0, 0) == "  notes                   0 rows"


async def test_tables_longer_than_one_batch_arrive_whole(vigil: VigilRunner, home: Path, postgres_url: str) -> None:
    from vigil.store.transfer import BATCH_ROWS

    n = BATCH_ROWS + 1234
    async with await SqliteStore.open(load_settings(home).store.path, clock=ManualClock()) as store:
        first = await store.add_tasks([NewTask(f"task {i}", source_key=f"k{i}") for i in range(n)], actor="test")
        assert len(first.created_ids) == n
        # follow-ups in the second batch whose parents are in the first
        parents = first.created_ids[:5]
        await store.add_tasks([NewTask(f"child of {p}", parent_id=p) for p in parents], actor="test")
    pg = _pg(postgres_url)
    args = ("task", "list", "--status", "pending", "--limit", str(n + 5), "--json")
    on_sqlite = _json(vigil(*args))  # before the move: the moved file refuses every reader
    proc = vigil("store", "migrate", "--to", postgres_url, check=True)
    assert f"  tasks          {n + 5:>10,} rows" in proc.stdout
    assert f"  task_events    {n + 5:>10,} rows" in proc.stdout
    assert _json(vigil(*args, env=pg)) == on_sqlite


@pytest.mark.parametrize("held", [True, False])
async def test_a_dispatcher_holding_a_lane_is_refused_and_a_dead_one_is_not(
    vigil: VigilRunner, home: Path, postgres_url: str, held: bool
) -> None:
    """A dispatcher is told by its lock, not by its heartbeat: one that holds a lane is
    refused at once; one that died a moment ago (its heartbeat still fresh, its lock
    freed by the kernel) is not waited for."""
    now = SystemClock().now_ms()
    path = load_settings(home).store.path
    async with await SqliteStore.open(path, clock=ManualClock(now)) as store:
        await store.add_task(NewTask("in flight?"))
        beat = DispatcherHeartbeat("vm:42:abc", 42, "vm", now - HOUR_MS, now - 1_000, "idle")
        await store.set_loop_values({HEARTBEAT_KEY: beat.to_json()})
    lock = DispatcherLock(lock_path_for(path), ManualClock(now))
    if held:
        assert lock.try_acquire()
    try:
        proc = vigil("store", "migrate", "--to", postgres_url)
    finally:
        lock.release()
    listed = _listed(vigil("task", "list", "--json", env=_pg(postgres_url)))
    if held:
        assert proc.returncode == 2
        assert proc.stderr.startswith(f"vigil: error: a dispatcher is running on this home (pid {os.getpid()} on ")
        assert proc.stderr.endswith(
            "stop every 'vigil run' first: what it does during the copy would stay behind in the SQLite file\n"
        )
        assert listed == []
    else:
        assert proc.returncode == 0, proc.stderr
        assert isinstance(listed, list)
        assert [t["subject"] for t in listed] == ["in flight?"]


@pytest.mark.timeout(300)
async def test_a_pruned_home_moves_over_with_its_archived_costs_and_retired_keys(
    vigil: VigilRunner, home: Path, postgres_url: str
) -> None:
    path = load_settings(home).store.path
    await _fill(path)
    clock = ManualClock(SystemClock().now_ms())
    async with await SqliteStore.open(path, clock=clock) as store:
        done = await store.add_task(
            NewTask("once ever", priority=1, source="sensor:feeds", source_key="ever-1", dedup=DedupScope.EVER)
        )
        claim = await store.claim_next(worker="w3", lease_ms=60_000)
        assert claim is not None
        assert claim.task.id == done.task_id
        await store.record(
            claim,
            Outcome(OutcomeKind.SUCCESS, summary="ok", cost_usd=0.25, model="model-c"),
            worker="w3",
        )
        pruned = await store.prune(finished_before_ms=clock.now_ms() + 1)
    assert pruned.tasks >= 3  # the completed chain, the failed and the canceled tasks, the "once ever" one
    before = [vigil(*args, check=True).stdout for args in STATS]
    assert "no runs" not in before[0]

    vigil("store", "migrate", "--to", postgres_url, check=True)
    pg = _pg(postgres_url)
    for args, on_sqlite in zip(STATS, before, strict=True):
        assert vigil(*args, env=pg, check=True).stdout == on_sqlite, args  # costs come from the archive
    # the pruned task's key stays used for good on the new store too
    again = _json(vigil("task", "add", "once ever", "--key", "ever-1", "--dedup", "ever", "--json", env=pg))
    assert isinstance(again, dict)
    assert again["created"] is False
