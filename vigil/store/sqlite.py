"""``Store`` on one SQLite file: the embedded default backend.

Each public method is one unit of work: one hop to the connection thread, one
``BEGIN IMMEDIATE`` transaction for writes (see ``sqlite_db``). The queries that a
method runs are named after it. Audit events, status counts and dependency counters
come from triggers (``sqlite_schema``), so they share the transaction of the change.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path

from vigil.clock import Clock, SystemClock
from vigil.config import LimitsSettings
from vigil.errors import DuplicateOpenTask, FloodLimited, InputError, InvalidTransition, TaskNotFound
from vigil.faults import crash_point
from vigil.models import (
    DEFAULT_MAX_RETRIES,
    FINISHED_STATUSES,
    MAX_PRIORITY,
    MIN_PRIORITY,
    AddResult,
    BatchResult,
    Claim,
    CostRow,
    DedupScope,
    NewTask,
    Note,
    Outcome,
    Run,
    SensorRun,
    SensorState,
    Task,
    TaskEvent,
    TaskStatus,
)
from vigil.store import CostGroup
from vigil.store.sqlite_db import Database
from vigil.store.sqlite_limits import FloodGate, Refusal
from vigil.store.sqlite_queries import (
    SQL_ADD_COSTS,
    SQL_ADD_TASK,
    SQL_ADD_TASK_EVER,
    SQL_APPROVE,
    SQL_CLAIM,
    SQL_CLAIM_UP_TO,
    SQL_COST_ROLLUP,
    SQL_COUNT_BY_STATUS,
    SQL_DROP_OPEN_RUN,
    SQL_FINISH,
    SQL_HOLD_FOR_APPROVAL,
    SQL_HOLDER_OF_KEY,
    SQL_LIST_NOTES,
    SQL_LIST_TASKS,
    SQL_LOOP_VALUE,
    SQL_LOOP_VALUES,
    SQL_NEXT_DUE_AT,
    SQL_NEXT_DUE_ID,  # noqa: F401 - re-exported: callers import every query from here
    SQL_OPEN_RUN,
    SQL_OPEN_RUNS,
    SQL_ORIGIN_OF,
    SQL_QUEUE,
    SQL_RECORD_RUN,
    SQL_RECORD_SENSOR_RUN,
    SQL_RECOVER,
    SQL_REJECT,
    SQL_RELEASE_CLOSED,
    SQL_RELEASE_UNRUN,
    SQL_REQUEUE,
    SQL_SEARCH_TASKS,
    SQL_SET_LOOP_VALUE,
    SQL_SPEND_SINCE,
)
from vigil.store.sqlite_rows import (
    row_to_note,
    row_to_run,
    row_to_sensor_state,
    row_to_task,
    row_to_task_event,
)
from vigil.store.sqlite_schema import check_openable, migrate


def _task_params(new: NewTask, now: int, actor: str, default_max_retries: int) -> tuple[object, ...]:
    """The positional parameters of ``SQL_ADD_TASK`` / ``SQL_ADD_TASK_EVER``."""
    if new.dedup is DedupScope.EVER and new.source_key is None:
        raise InputError("dedup scope 'ever' needs a source key")
    return (
        new.subject,
        new.description,
        json.dumps(list(new.skills)) if new.skills else "[]",
        new.priority,
        new.source,
        new.source_key,
        new.parent_id,
        now if new.scheduled_for is None else new.scheduled_for,
        now,
        actor,
        default_max_retries if new.max_retries is None else new.max_retries,
        int(new.requires_approval),
    )


def _data_version(conn: sqlite3.Connection) -> int:
    """Changes whenever another connection commits (this one's commits leave it)."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _require_task(conn: sqlite3.Connection, task_id: int) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
    if row is None:
        raise TaskNotFound(task_id)
    return row


def _not_awaiting_approval(conn: sqlite3.Connection, task_id: int, action: str) -> InvalidTransition:
    status = _require_task(conn, task_id)["status"]
    return InvalidTransition(task_id, f"{status} and not awaiting approval", action)


def _check_new_task(conn: sqlite3.Connection, new: NewTask) -> None:
    """Validate what the schema cannot say clearly (raises before any insert)."""
    if not new.subject.strip():
        raise InputError("subject must not be empty")
    if not MIN_PRIORITY <= new.priority <= MAX_PRIORITY:
        raise InputError(f"priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {new.priority}")
    if new.max_retries is not None and new.max_retries < 0:
        raise InputError(f"max retries must be 0 or more, not {new.max_retries}")
    if new.parent_id is not None:
        _require_task(conn, new.parent_id)
    for dep in new.depends_on:
        _require_task(conn, dep)


def _insert_task(
    conn: sqlite3.Connection, new: NewTask, now: int, actor: str, max_retries: int, *, flood: FloodGate | None = None
) -> int | Refusal | None:
    """Insert one task and its dependencies: its id, None when the source key
    deduplicated it, or the ``Refusal`` of a flood limit (counted, nothing added)."""
    _check_new_task(conn, new)
    params = _task_params(new, now, actor, max_retries)
    sql = SQL_ADD_TASK if new.dedup is DedupScope.OPEN else SQL_ADD_TASK_EVER
    refusal = None if flood is None else flood.check(conn, new)
    if flood is not None and refusal is not None:
        # A task its key deduplicates is "already there", not refused: find out by
        # inserting it and undoing that (only on this rare path).
        conn.execute("SAVEPOINT flood_check")
        row = conn.execute(sql, params).fetchone()
        conn.execute("ROLLBACK TO flood_check")
        conn.execute("RELEASE flood_check")
        if row is None:
            return None
        flood.record(conn, new, refusal)
        return refusal
    row = conn.execute(sql, params).fetchone()
    if row is None:
        return None
    if flood is not None:
        flood.added(new)
    task_id = int(row[0])
    conn.executemany(
        "INSERT OR IGNORE INTO task_deps (task_id, depends_on) VALUES (?, ?)",
        [(task_id, dep) for dep in new.depends_on],
    )
    return task_id


class SqliteStore:
    """The ``Store`` protocol on one SQLite file. Open with ``await SqliteStore.open(path)``."""

    def __init__(
        self, db: Database, clock: Clock, default_max_retries: int, limits: LimitsSettings | None = None
    ) -> None:
        self._db = db
        self._clock = clock
        self._default_max_retries = default_max_retries
        self._limits = limits
        self.path = db.path

    def _flood_gate(self, now: int) -> FloodGate | None:
        """The flood limits for one insert transaction (None: no limits configured)."""
        return None if self._limits is None else FloodGate(self._limits, now)

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        clock: Clock | None = None,
        synchronous: str = "FULL",
        busy_timeout_ms: int = 5000,
        default_max_retries: int = DEFAULT_MAX_RETRIES,
        limits: LimitsSettings | None = None,
    ) -> SqliteStore:
        """Open (creating and migrating if needed) the database at ``path``.

        ``limits`` are the flood limits every insert obeys (None: none). Raises
        ``NotADatabase``, ``SchemaTooNew`` or ``StoreError``.
        """
        db = await Database.open(path, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms, check=check_openable)
        try:
            await db.read(lambda conn: migrate(conn, path))
        except BaseException:
            await db.close()
            raise
        return cls(db, clock or SystemClock(), default_max_retries, limits)

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> SqliteStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- adding -------------------------------------------------------------------
    async def add_task(self, new: NewTask, *, actor: str = "human") -> AddResult:
        now = self._clock.now_ms()

        def body(conn: sqlite3.Connection) -> AddResult | Refusal:
            task_id = _insert_task(conn, new, now, actor, self._default_max_retries, flood=self._flood_gate(now))
            if isinstance(task_id, Refusal):
                return task_id  # committed with its count; raised below
            if task_id is not None:
                return AddResult(task_id, True)
            holder = conn.execute(SQL_HOLDER_OF_KEY, (new.source_key,)).fetchone()[0]
            return AddResult(None if holder is None else int(holder), False)

        result = await self._db.write(body)
        if isinstance(result, Refusal):
            raise FloodLimited(f"task not added: {result.reason}")
        return result

    async def add_tasks(self, news: Sequence[NewTask], *, actor: str) -> BatchResult:
        now = self._clock.now_ms()

        def body(conn: sqlite3.Connection) -> BatchResult:
            flood = self._flood_gate(now)
            created = [_insert_task(conn, new, now, actor, self._default_max_retries, flood=flood) for new in news]
            ids = tuple(task_id for task_id in created if isinstance(task_id, int))
            rejected = sum(isinstance(task_id, Refusal) for task_id in created)
            crash_point("sensor-batch")
            return BatchResult(ids, len(news) - len(ids) - rejected, rejected)

        return await self._db.write(body)

    # --- reading ------------------------------------------------------------------
    async def get_task(self, task_id: int) -> Task:
        return await self._db.read(lambda conn: row_to_task(_require_task(conn, task_id)))

    async def list_tasks(
        self,
        *,
        statuses: Collection[TaskStatus] | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Task]:
        wanted = {f"s{i}": str(s) for i, s in enumerate(statuses or TaskStatus)}
        sql = SQL_LIST_TASKS.format(statuses=",".join(f":{name}" for name in wanted))
        params = {**wanted, "before_id": before_id if before_id is not None else 2**62, "limit": limit}
        return await self._db.read(lambda conn: [row_to_task(r) for r in conn.execute(sql, params)])

    async def search_tasks(
        self,
        text: str,
        *,
        statuses: Collection[TaskStatus] | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Task]:
        wanted = [str(s) for s in (statuses or TaskStatus)]
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        sql = SQL_SEARCH_TASKS.replace(":statuses", "(" + ",".join("?" * len(wanted)) + ")")
        params = (*wanted, before_id if before_id is not None else 2**62, pattern, pattern, pattern, pattern, limit)
        return await self._db.read(lambda conn: [row_to_task(r) for r in conn.execute(sql, params)])

    async def queue(self, *, limit: int = 200) -> list[Task]:
        params = {"now": self._clock.now_ms(), "limit": limit}
        return await self._db.read(lambda conn: [row_to_task(r) for r in conn.execute(SQL_QUEUE, params)])

    async def count_by_status(self) -> dict[TaskStatus, int]:
        rows = await self._db.read(lambda conn: conn.execute(SQL_COUNT_BY_STATUS).fetchall())
        counts = dict.fromkeys(TaskStatus, 0)
        counts.update({TaskStatus(r["status"]): int(r["n"]) for r in rows})
        return counts

    async def next_due_at(self) -> int | None:
        value = await self._db.read(lambda conn: conn.execute(SQL_NEXT_DUE_AT).fetchone()[0])
        return None if value is None else int(value)

    async def list_runs(self, task_id: int) -> list[Run]:
        sql = "SELECT * FROM runs WHERE task_id = ? ORDER BY attempt"
        return await self._db.read(lambda conn: [row_to_run(r) for r in conn.execute(sql, (task_id,))])

    async def list_events(self, task_id: int) -> list[TaskEvent]:
        sql = "SELECT * FROM task_events WHERE task_id = ? ORDER BY id"
        return await self._db.read(lambda conn: [row_to_task_event(r) for r in conn.execute(sql, (task_id,))])

    async def list_notes(self, task_id: int) -> list[Note]:
        return await self._db.read(lambda conn: [row_to_note(r) for r in conn.execute(SQL_LIST_NOTES, (task_id,))])

    async def dependencies(self, task_id: int) -> list[int]:
        sql = "SELECT depends_on FROM task_deps WHERE task_id = ? ORDER BY depends_on"
        return await self._db.read(lambda conn: [int(r[0]) for r in conn.execute(sql, (task_id,))])

    async def cost_rollup(self, *, since_ms: int, by: CostGroup) -> list[CostRow]:
        sql = SQL_COST_ROLLUP[by]

        def body(conn: sqlite3.Connection) -> list[CostRow]:
            return [
                CostRow(
                    key=str(r["key"]),
                    runs=int(r["runs"]),
                    tasks=int(r["tasks"]),
                    cost_usd=float(r["cost_usd"]),
                    api_cost_usd=float(r["api_cost_usd"]),
                    tokens_in=int(r["tokens_in"]),
                    tokens_out=int(r["tokens_out"]),
                    cache_read_tokens=int(r["cache_read_tokens"]),
                    cache_write_tokens=int(r["cache_write_tokens"]),
                )
                for r in conn.execute(sql, {"since": since_ms})
            ]

        return await self._db.read(body)

    async def data_version(self) -> int:
        return await self._db.read(_data_version)

    # --- changing -----------------------------------------------------------------
    async def _change(
        self,
        task_id: int,
        action: str,
        allowed: Iterable[TaskStatus],
        sql: str,
        params: Mapping[str, object],
    ) -> Task:
        """Run one conditional ``UPDATE … WHERE id = :id AND status IN :allowed
        RETURNING *``; if no row matched, raise ``InvalidTransition`` naming the
        status that refused it (or ``TaskNotFound``)."""
        now = self._clock.now_ms()
        allowed_values = [str(s) for s in allowed]
        marks = ",".join(f"'{s}'" for s in allowed_values)
        statement = sql.replace(":allowed", f"({marks})")

        def body(conn: sqlite3.Connection) -> Task:
            row = conn.execute(statement, {**params, "id": task_id, "now": now}).fetchone()
            if row is not None:
                return row_to_task(row)
            current = _require_task(conn, task_id)
            raise InvalidTransition(task_id, current["status"], action)

        try:
            return await self._db.write(body)
        except DuplicateOpenTask:
            raise DuplicateOpenTask(f"task #{task_id}: another open task already has its source key") from None

    async def cancel(self, task_id: int, *, actor: str) -> Task:
        now = self._clock.now_ms()

        def body(conn: sqlite3.Connection) -> Task:
            row = conn.execute(
                """UPDATE tasks SET status = CASE WHEN status = 'active' THEN status ELSE 'canceled' END,
                       cancel_requested = CASE WHEN status = 'active' THEN 1 ELSE cancel_requested END,
                       completed_at = CASE WHEN status = 'active' THEN completed_at ELSE :now END,
                       updated_at = :now, updated_by = :actor
                   WHERE id = :id AND status IN ('pending', 'blocked', 'active') RETURNING *""",
                {"id": task_id, "now": now, "actor": actor},
            ).fetchone()
            if row is None:
                raise InvalidTransition(task_id, _require_task(conn, task_id)["status"], "cancel")
            return row_to_task(row)

        return await self._db.write(body)

    async def set_priority(self, task_id: int, priority: int, *, actor: str) -> Task:
        if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
            raise InputError(f"priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {priority}")
        return await self._change(
            task_id,
            "change its priority",
            (TaskStatus.PENDING, TaskStatus.BLOCKED),
            """UPDATE tasks SET priority = :priority, updated_at = :now, updated_by = :actor
               WHERE id = :id AND status IN :allowed RETURNING *""",
            {"priority": priority, "actor": actor},
        )

    async def defer(self, task_id: int, until_ms: int, *, actor: str) -> Task:
        return await self._change(
            task_id,
            "defer it",
            (TaskStatus.PENDING, TaskStatus.BLOCKED),
            """UPDATE tasks SET scheduled_for = :until, updated_at = :now, updated_by = :actor
               WHERE id = :id AND status IN :allowed RETURNING *""",
            {"until": until_ms, "actor": actor},
        )

    async def retry(self, task_id: int, *, actor: str) -> Task:
        return await self._change(
            task_id,
            "retry it",
            (TaskStatus.FAILED, TaskStatus.CANCELED),
            # A task that needed approval needs it again: it goes back to waiting for it.
            """UPDATE tasks SET status = CASE WHEN approval IS NULL THEN 'pending' ELSE 'blocked' END,
                   approval = CASE WHEN approval IS NULL THEN NULL ELSE 'pending' END,
                   scheduled_for = :now, attempt_count = 0,
                   completed_at = NULL, cancel_requested = 0, updated_at = :now, updated_by = :actor
               WHERE id = :id AND status IN :allowed RETURNING *""",
            {"actor": actor},
        )

    async def close_task(self, task_id: int, status: TaskStatus, summary: str, *, actor: str) -> Task:
        if status not in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.BLOCKED):
            raise InputError(f"a task can be closed as completed, failed or blocked, not {status}")
        return await self._change(
            task_id,
            f"close it as {status}",
            (TaskStatus.PENDING, TaskStatus.ACTIVE, TaskStatus.BLOCKED),
            """UPDATE tasks SET status = :status, result_summary = :summary, updated_at = :now,
                   updated_by = :actor,
                   completed_at = CASE WHEN :status = 'blocked' THEN NULL ELSE :now END
               WHERE id = :id AND status IN :allowed RETURNING *""",
            {"status": str(status), "summary": summary, "actor": actor},
        )

    async def add_note(self, task_id: int, text: str, *, author: str) -> Note:
        if not text.strip():
            raise InputError("note text must not be empty")
        now = self._clock.now_ms()

        def body(conn: sqlite3.Connection) -> Note:
            _require_task(conn, task_id)
            row = conn.execute(
                "INSERT INTO notes (task_id, at, author, text) VALUES (?, ?, ?, ?) RETURNING *",
                (task_id, now, author, text),
            ).fetchone()
            return row_to_note(row)

        return await self._db.write(body)

    async def approve(self, task_id: int, *, actor: str) -> Task:
        now = self._clock.now_ms()

        def body(conn: sqlite3.Connection) -> Task:
            row = conn.execute(SQL_APPROVE, {"id": task_id, "now": now, "actor": actor}).fetchone()
            if row is None:
                raise _not_awaiting_approval(conn, task_id, "approve it")
            return row_to_task(row)

        return await self._db.write(body)

    async def reject(self, task_id: int, reason: str, *, actor: str) -> Task:
        if not reason.strip():
            raise InputError("a rejection needs a reason")
        now = self._clock.now_ms()
        params = {"id": task_id, "now": now, "actor": actor, "summary": f"rejected: {reason.strip()}"}

        def body(conn: sqlite3.Connection) -> Task:
            row = conn.execute(SQL_REJECT, params).fetchone()
            if row is None:
                raise _not_awaiting_approval(conn, task_id, "reject it")
            return row_to_task(row)

        return await self._db.write(body)

    # --- dispatching ----------------------------------------------------------------
    async def claim_next(
        self, *, worker: str, lease_ms: int, executor: str | None = None, max_priority: int | None = None
    ) -> Claim | None:
        return await self._db.write(self._claim_body(worker, lease_ms, executor, max_priority))

    def _claim_body(
        self, worker: str, lease_ms: int, executor: str | None, max_priority: int | None
    ) -> Callable[[sqlite3.Connection], Claim | None]:
        """The body of a claim, to run inside a write transaction (validated here)."""
        now = self._clock.now_ms()
        params = {"now": now, "worker": worker, "lease_until": now + lease_ms, "executor": executor}
        if max_priority is not None and not MIN_PRIORITY <= max_priority <= MAX_PRIORITY:
            raise InputError(f"max_priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {max_priority}")
        claim_sql = SQL_CLAIM if max_priority is None else SQL_CLAIM_UP_TO[max_priority]

        def body(conn: sqlite3.Connection) -> Claim | None:
            row = conn.execute(claim_sql, params).fetchone()
            if row is None:
                return None
            task = row_to_task(row)
            run = conn.execute(SQL_OPEN_RUN, {**params, "task_id": task.id}).fetchone()
            notes = tuple(row_to_note(r) for r in conn.execute(SQL_LIST_NOTES, (task.id,)))
            return Claim(task=task, run_id=int(run["id"]), attempt=int(run["attempt"]), notes=notes)

        return body

    async def set_run_process(self, run_id: int, *, pid: int, pgid: int, proc_start: str | None) -> None:
        await self._db.write(
            lambda conn: conn.execute(
                "UPDATE runs SET pid = ?, pgid = ?, proc_start = ? WHERE id = ?",
                (pid, pgid, proc_start, run_id),
            )
        )

    async def renew_lease(self, task_id: int, *, worker: str, lease_until: int) -> bool:
        def body(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                """UPDATE tasks SET lease_until = ? WHERE id = ? AND claimed_by = ?
                   RETURNING cancel_requested""",
                (lease_until, task_id, worker),
            ).fetchone()
            if row is None:
                raise InvalidTransition(task_id, _require_task(conn, task_id)["status"], "renew its lease")
            return bool(row[0])

        return await self._db.write(body)

    def _record_run(self, conn: sqlite3.Connection, claim: Claim, outcome: Outcome, now: int) -> bool:
        """Record the outcome on the claim's run and add its costs to the task; False
        (and nothing written) when that run was already recorded."""
        values = {
            "now": now,
            "run_id": claim.run_id,
            "task_id": claim.task.id,
            "outcome": str(outcome.kind),
            "error": outcome.error,
            "exit_code": outcome.exit_code,
            "cost_usd": outcome.cost_usd,
            "api_cost_usd": outcome.api_cost_usd,
            "tokens_in": outcome.tokens_in,
            "tokens_out": outcome.tokens_out,
            "cache_read_tokens": outcome.cache_read_tokens,
            "cache_write_tokens": outcome.cache_write_tokens,
            "model": outcome.model,
            "session_id": outcome.session_id,
            "transcript_path": outcome.transcript_path,
        }
        if conn.execute(SQL_RECORD_RUN, values).rowcount == 0:
            return False
        conn.execute(SQL_ADD_COSTS, values)
        return True

    async def finish(self, claim: Claim, outcome: Outcome, status: TaskStatus, *, worker: str) -> Task:
        return await self._db.write(self._finish_body(claim, outcome, status, worker))

    def _finish_body(
        self, claim: Claim, outcome: Outcome, status: TaskStatus, worker: str
    ) -> Callable[[sqlite3.Connection], Task]:
        """The body of a finish, to run inside a write transaction (validated here)."""
        if status not in FINISHED_STATUSES:
            raise InputError(f"finish takes completed, failed or canceled, not {status}")
        now = self._clock.now_ms()

        def body(conn: sqlite3.Connection) -> Task:
            if not self._record_run(conn, claim, outcome, now):
                return row_to_task(_require_task(conn, claim.task.id))  # a replayed claim
            params = {
                "now": now,
                "task_id": claim.task.id,
                "worker": worker,
                "status": str(status),
                "summary": outcome.summary,
                "detail": outcome.detail,
            }
            if conn.execute(SQL_FINISH, params).rowcount == 0:
                conn.execute(SQL_RELEASE_CLOSED, params)  # the agent closed it: keep its status
            crash_point("during-finish")
            return row_to_task(_require_task(conn, claim.task.id))

        return body

    async def finish_and_claim(
        self,
        claim: Claim,
        outcome: Outcome,
        status: TaskStatus,
        *,
        worker: str,
        lease_ms: int,
        executor: str | None = None,
        max_priority: int | None = None,
        if_version: int | None = None,
    ) -> tuple[Task, Claim | None]:
        finish = self._finish_body(claim, outcome, status, worker)
        claim_next = self._claim_body(worker, lease_ms, executor, max_priority)

        def body(conn: sqlite3.Connection) -> tuple[Task, Claim | None]:
            finished = finish(conn)
            # Inside BEGIN IMMEDIATE the version is that of the snapshot the claim
            # reads, so "unchanged" holds for the claim itself, not just before it.
            if if_version is not None and _data_version(conn) != if_version:
                return finished, None
            return finished, claim_next(conn)

        return await self._db.write(body)

    async def requeue(self, claim: Claim, outcome: Outcome, *, retry_at: int, count_attempt: bool, worker: str) -> Task:
        now = self._clock.now_ms()

        def body(conn: sqlite3.Connection) -> Task:
            if not self._record_run(conn, claim, outcome, now):
                return row_to_task(_require_task(conn, claim.task.id))  # a replayed claim
            params = {
                "now": now,
                "task_id": claim.task.id,
                "worker": worker,
                "retry_at": retry_at,
                "give_back": 0 if count_attempt else 1,
                "summary": outcome.summary or None,
            }
            if conn.execute(SQL_REQUEUE, params).rowcount == 0:
                conn.execute(SQL_RELEASE_CLOSED, params)
            return row_to_task(_require_task(conn, claim.task.id))

        return await self._db.write(body)

    async def hold_for_approval(self, claim: Claim, *, worker: str) -> Task:
        params = {"now": self._clock.now_ms(), "task_id": claim.task.id, "run_id": claim.run_id, "worker": worker}

        def body(conn: sqlite3.Connection) -> Task:
            row = conn.execute(SQL_HOLD_FOR_APPROVAL, params).fetchone()
            if row is None:
                raise InvalidTransition(claim.task.id, _require_task(conn, claim.task.id)["status"], "hold it")
            conn.execute(SQL_DROP_OPEN_RUN, params)
            return row_to_task(row)

        return await self._db.write(body)

    async def release_unrun(self, claim: Claim, *, worker: str, retry_at: int) -> Task:
        params = {
            "now": self._clock.now_ms(),
            "task_id": claim.task.id,
            "run_id": claim.run_id,
            "worker": worker,
            "retry_at": retry_at,
        }

        def body(conn: sqlite3.Connection) -> Task:
            row = conn.execute(SQL_RELEASE_UNRUN, params).fetchone()
            if row is None:
                raise InvalidTransition(claim.task.id, _require_task(conn, claim.task.id)["status"], "release it")
            conn.execute(SQL_DROP_OPEN_RUN, params)
            return row_to_task(row)

        return await self._db.write(body)

    async def spend_since(self, since_ms: int) -> float:
        return float(await self._db.read(lambda conn: conn.execute(SQL_SPEND_SINCE, (since_ms,)).fetchone()[0]))

    async def origin_of(self, task_id: int) -> str:
        def body(conn: sqlite3.Connection) -> str:
            row = conn.execute(SQL_ORIGIN_OF, (task_id,)).fetchone()
            if row is None:
                raise TaskNotFound(task_id)
            return str(row[0])

        return await self._db.read(body)

    async def active_tasks(self) -> list[Task]:
        sql = "SELECT * FROM tasks WHERE status = 'active' ORDER BY id"
        return await self._db.read(lambda conn: [row_to_task(r) for r in conn.execute(sql)])

    async def open_runs(self) -> list[Run]:
        return await self._db.read(lambda conn: [row_to_run(r) for r in conn.execute(SQL_OPEN_RUNS)])

    async def recover(self, run_id: int, outcome: Outcome, *, status: TaskStatus, retry_at: int | None = None) -> Task:
        if status not in (TaskStatus.PENDING, TaskStatus.FAILED, TaskStatus.CANCELED):
            raise InputError(f"recover takes pending, failed or canceled, not {status}")
        if status is TaskStatus.PENDING and retry_at is None:
            raise InputError("recovering a task as pending needs a retry time")
        now = self._clock.now_ms()

        def body(conn: sqlite3.Connection) -> Task:
            run = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
            if run is None:
                raise InputError(f"run {run_id} not found")
            task = row_to_task(_require_task(conn, run["task_id"]))
            if run["finished_at"] is not None:
                return task
            self._record_run(conn, Claim(task=task, run_id=run_id, attempt=run["attempt"]), outcome, now)
            params = {
                "now": now,
                "task_id": task.id,
                "worker": run["claimed_by"],
                "status": str(status),
                "retry_at": retry_at,
                "summary": outcome.summary or None,
            }
            if conn.execute(SQL_RECOVER, params).rowcount == 0 and run["claimed_by"] is not None:
                conn.execute(SQL_RELEASE_CLOSED, params)  # the agent closed it: keep its status
            return row_to_task(_require_task(conn, task.id))

        return await self._db.write(body)

    # --- sensors ----------------------------------------------------------------------
    async def sensor_states(self) -> list[SensorState]:
        sql = "SELECT * FROM sensor_state ORDER BY name"
        return await self._db.read(lambda conn: [row_to_sensor_state(r) for r in conn.execute(sql)])

    async def sensor_state(self, name: str) -> SensorState | None:
        sql = "SELECT * FROM sensor_state WHERE name = ?"

        def body(conn: sqlite3.Connection) -> SensorState | None:
            row = conn.execute(sql, (name,)).fetchone()
            return None if row is None else row_to_sensor_state(row)

        return await self._db.read(body)

    async def record_sensor_run(
        self,
        name: str,
        run: SensorRun,
        tasks: Sequence[NewTask],
        state: Mapping[str, object] | None,
    ) -> BatchResult:
        now = self._clock.now_ms()
        actor = f"sensor:{name}"

        def body(conn: sqlite3.Connection) -> BatchResult:
            flood = self._flood_gate(now)
            created = [_insert_task(conn, new, now, actor, self._default_max_retries, flood=flood) for new in tasks]
            ids = tuple(task_id for task_id in created if isinstance(task_id, int))
            rejected = sum(isinstance(task_id, Refusal) for task_id in created)
            conn.execute(
                SQL_RECORD_SENSOR_RUN,
                {
                    "name": name,
                    "started_at": run.started_at,
                    "duration_ms": run.duration_ms,
                    "status": run.status,
                    "error": run.error,
                    "failures": run.consecutive_failures,
                    "created": len(ids),
                    "ignored": len(tasks) - len(ids) - rejected,
                    "dropped": run.dropped,
                    "rejected": rejected,
                    "next_due_at": run.next_due_at,
                    "state": None if state is None else json.dumps(dict(state)),
                },
            )
            crash_point("sensor-batch")
            return BatchResult(ids, len(tasks) - len(ids) - rejected, rejected)

        return await self._db.write(body)

    async def set_sensor_enabled(self, name: str, enabled: bool) -> None:
        await self._db.write(
            lambda conn: conn.execute(
                """INSERT INTO sensor_state (name, enabled) VALUES (?, ?)
                   ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled""",
                (name, int(enabled)),
            )
        )

    # --- loop state -------------------------------------------------------------------
    async def loop_values(self) -> dict[str, object]:
        rows = await self._db.read(lambda conn: conn.execute(SQL_LOOP_VALUES).fetchall())
        return {str(r["key"]): json.loads(r["value"]) for r in rows}

    async def versioned_loop_values(self) -> tuple[dict[str, object], int]:
        def body(conn: sqlite3.Connection) -> tuple[list[sqlite3.Row], int]:
            # The version first: a commit landing between the two reads then makes
            # the version look stale (a needless re-read), never the values.
            version = _data_version(conn)
            return conn.execute(SQL_LOOP_VALUES).fetchall(), version

        rows, version = await self._db.read(body)
        return {str(r["key"]): json.loads(r["value"]) for r in rows}, version

    async def set_loop_values(self, values: Mapping[str, object]) -> None:
        rows = [(key, json.dumps(value)) for key, value in values.items()]
        await self._db.write(
            lambda conn: conn.executemany(
                """INSERT INTO loop_state (key, value) VALUES (?, ?)
                   ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
                rows,
            )
        )

    async def replace_loop_value(self, key: str, expected: object, value: object) -> bool:
        encoded = json.dumps(value)

        def body(conn: sqlite3.Connection) -> bool:
            row = conn.execute(SQL_LOOP_VALUE, (key,)).fetchone()
            current = None if row is None else json.loads(row[0])
            if current != expected:
                return False
            conn.execute(SQL_SET_LOOP_VALUE, (key, encoded))
            return True

        return await self._db.write(body)

    # --- maintenance ------------------------------------------------------------------
    async def backup(self, target: Path) -> None:
        await self._db.backup(target)

    async def checkpoint(self) -> tuple[int, int]:
        row = await self._db.read(lambda conn: conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())
        return int(row[1]), int(row[2])

    async def integrity_check(self) -> str:
        """``ok``, or SQLite's first complaint."""
        return str(await self._db.read(lambda conn: conn.execute("PRAGMA quick_check").fetchone()[0]))

    async def explain(self, sql: str, params: Mapping[str, object] | Sequence[object]) -> list[str]:
        """The query plan of ``sql`` (for tests and ``vigil doctor``)."""
        rows = await self._db.read(lambda conn: conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall())
        return [str(r["detail"]) for r in rows]
