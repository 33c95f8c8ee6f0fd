"""``Store`` on one SQLite file: the embedded default backend.

Each public method is one unit of work: one hop to the connection thread, one
``BEGIN IMMEDIATE`` transaction for writes (see ``sqlite_db``). The queries that a
method runs are named after it. Audit events, status counts and dependency counters
come from triggers (``sqlite_schema``), so they share the transaction of the change.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

from vigil.clock import Clock, SystemClock
from vigil.config import LimitsSettings
from vigil.errors import DuplicateOpenTask, FloodLimited, InputError, InvalidTransition
from vigil.faults import crash_point
from vigil.models import (
    DEFAULT_MAX_RETRIES,
    MAX_PRIORITY,
    MIN_PRIORITY,
    AddResult,
    BatchResult,
    CostRow,
    NewTask,
    Note,
    Run,
    Task,
    TaskEvent,
    TaskStatus,
)
from vigil.store import CostGroup
from vigil.store.sqlite_base import (
    data_version_of,
    insert_task,
    not_awaiting_approval,
    require_task,
)
from vigil.store.sqlite_db import Database
from vigil.store.sqlite_dispatch import DispatchMethods
from vigil.store.sqlite_limits import Refusal
from vigil.store.sqlite_queries import (
    SQL_APPROVE,
    SQL_COST_ROLLUP,
    SQL_COUNT_BY_STATUS,
    SQL_EVENTS_AFTER,
    SQL_HOLDER_OF_KEY,
    SQL_LIST_NOTES,
    SQL_LIST_TASKS,
    SQL_NEXT_DUE_AT,
    SQL_QUEUE,
    SQL_REJECT,
    SQL_REQUEST_RETRY,
    SQL_SEARCH_TASKS,
)
from vigil.store.sqlite_retention import RetentionMethods
from vigil.store.sqlite_rows import (
    row_to_note,
    row_to_run,
    row_to_task,
    row_to_task_event,
)
from vigil.store.sqlite_schema import check_openable, migrate
from vigil.store.sqlite_state import StateMethods


class SqliteStore(DispatchMethods, StateMethods, RetentionMethods):
    """The ``Store`` protocol on one SQLite file. Open with ``await SqliteStore.open(path)``."""

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
            task_id = insert_task(conn, new, now, actor, self._default_max_retries, flood=self._flood_gate(now))
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
            created = [insert_task(conn, new, now, actor, self._default_max_retries, flood=flood) for new in news]
            ids = tuple(task_id for task_id in created if isinstance(task_id, int))
            rejected = sum(isinstance(task_id, Refusal) for task_id in created)
            crash_point("sensor-batch")
            return BatchResult(ids, len(news) - len(ids) - rejected, rejected)

        return await self._db.write(body)

    # --- reading ------------------------------------------------------------------
    async def get_task(self, task_id: int) -> Task:
        return await self._db.read(lambda conn: row_to_task(require_task(conn, task_id)))

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

    async def events_after(
        self,
        after_id: int,
        *,
        since_ms: int | None = None,
        task_id: int | None = None,
        kinds: Collection[str] = (),
        limit: int = 500,
    ) -> list[TaskEvent]:
        params = {
            "after": after_id,
            "since": since_ms,
            "task": task_id,
            "kinds": json.dumps(list(kinds)) if kinds else None,
            "limit": limit,
        }
        return await self._db.read(lambda conn: [row_to_task_event(r) for r in conn.execute(SQL_EVENTS_AFTER, params)])

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
        return await self._db.read(data_version_of)

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
            current = require_task(conn, task_id)
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
                raise InvalidTransition(task_id, require_task(conn, task_id)["status"], "cancel")
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

    async def request_retry(self, task_id: int, retry_at: int, summary: str, *, actor: str) -> Task:
        params = {"id": task_id, "retry_at": retry_at, "summary": summary, "now": self._clock.now_ms(), "actor": actor}

        def body(conn: sqlite3.Connection) -> Task:
            row = conn.execute(SQL_REQUEST_RETRY, params).fetchone()
            if row is None:
                current = require_task(conn, task_id)
                status = "active with a cancel requested" if current["cancel_requested"] else current["status"]
                raise InvalidTransition(task_id, status, "ask for a retry (only a running task can)")
            return row_to_task(row)

        return await self._db.write(body)

    async def add_note(self, task_id: int, text: str, *, author: str) -> Note:
        if not text.strip():
            raise InputError("note text must not be empty")
        now = self._clock.now_ms()

        def body(conn: sqlite3.Connection) -> Note:
            require_task(conn, task_id)
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
                raise not_awaiting_approval(conn, task_id, "approve it")
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
                raise not_awaiting_approval(conn, task_id, "reject it")
            return row_to_task(row)

        return await self._db.write(body)
