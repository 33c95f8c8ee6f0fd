"""``Store`` on PostgreSQL: several dispatchers on several hosts share one queue.

Open with ``await PostgresStore.open(url)``. Each public method is one unit of work:
one statement in autocommit mode where it can be (a claim with its run row, notes
and audit event; a finish with its run and costs; a plain add), else one
transaction (``postgres_db``); ``finish_and_claim`` sends its two statements in one
pipeline. The connection pool, the listening session and the translation of driver
errors into ``vigil.errors`` are in ``postgres_db``. Audit
events, status counts and dependency counters come from triggers
(``postgres_schema``), so they share the transaction of the change.

Differences from SQLite that callers may notice:

* ``data_version()`` is notification-driven (LISTEN/NOTIFY): it moves soon after
  another store object commits a change (this one's own commits do not move it),
  with no round trip per call; see ``postgres_db.Changes``.
* ``finish_and_claim(if_version=…)`` compares a loop-state version (moved by any
  loop-state write of another store object), which is what ``versioned_loop_values``
  returns; it is checked under a row lock in the claim's transaction.
* ``checkpoint()`` returns (0, 0); ``backup()`` refuses and points to ``pg_dump``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from vigil.clock import Clock, SystemClock
from vigil.config import LimitsSettings
from vigil.errors import DuplicateOpenTask, FloodLimited, InputError, InvalidTransition
from vigil.models import (
    DEFAULT_MAX_RETRIES,
    MAX_PRIORITY,
    MIN_PRIORITY,
    AddResult,
    BatchResult,
    CostRow,
    DedupScope,
    NewTask,
    Note,
    Run,
    Task,
    TaskEvent,
    TaskStatus,
)
from vigil.store import CostGroup
from vigil.store.postgres_base import (
    fetch_all,
    fetch_one,
    insert_task,
    not_awaiting_approval,
    require_task,
    task_params,
)
from vigil.store.postgres_costs import SQL_COST_ROLLUP
from vigil.store.postgres_db import POOL_MAX, Conn, PgDatabase
from vigil.store.postgres_dispatch import DispatchMethods
from vigil.store.postgres_queries import (
    SQL_ADD_NOTE,
    SQL_ADD_TASK,
    SQL_ADD_TASK_EVER,
    SQL_APPROVE,
    SQL_CANCEL,
    SQL_CLOSE_TASK,
    SQL_COUNT_BY_STATUS,
    SQL_DEFER,
    SQL_DEPENDENCIES,
    SQL_EVENTS_AFTER,
    SQL_HOLDER_OF_KEY,
    SQL_LIST_EVENTS,
    SQL_LIST_NOTES,
    SQL_LIST_RUNS,
    SQL_NEXT_DUE_AT,
    SQL_QUEUE,
    SQL_REJECT,
    SQL_REQUEST_RETRY,
    SQL_RETRY,
    SQL_SEARCH_TASKS,
    SQL_SET_PRIORITY,
    list_tasks_sql,
)
from vigil.store.postgres_retention import RetentionMethods
from vigil.store.postgres_rows import row_to_note, row_to_run, row_to_task, row_to_task_event
from vigil.store.postgres_state import StateMethods
from vigil.store.sqlite_limits import Refusal

_NO_UPPER_ID = 2**62


class PostgresStore(DispatchMethods, StateMethods, RetentionMethods):
    """The ``Store`` protocol on one PostgreSQL database."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        clock: Clock | None = None,
        default_max_retries: int = DEFAULT_MAX_RETRIES,
        limits: LimitsSettings | None = None,
        pool_max: int = POOL_MAX,
        busy_timeout_ms: int = 5000,
    ) -> PostgresStore:
        """Connect to ``url`` (a ``postgresql://`` URL), creating or migrating the
        schema if needed. ``limits`` are the flood limits every insert obeys (None:
        none); ``pool_max`` bounds this store's connections (plus one listening);
        ``busy_timeout_ms`` is how long a write waits for a row or table another
        session holds locked before it is retried (then ``StoreBusy``).
        Raises ``StoreError`` (one line naming host:port/db, never the password) or
        ``SchemaTooNew``."""
        db = await PgDatabase.open(url, pool_max=pool_max, lock_timeout_ms=busy_timeout_ms)
        return cls(db, clock or SystemClock(), default_max_retries, limits)

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- adding -------------------------------------------------------------------
    async def add_task(self, new: NewTask, *, actor: str = "human") -> AddResult:
        now = self._clock.now_ms()
        if not new.depends_on and new.parent_id is None and not self._may_refuse(new):
            return await self._add_alone(new, now, actor)

        async def body(conn: Conn) -> AddResult | Refusal:
            flood = self._flood_gate(now)
            task_id = await insert_task(conn, new, now, actor, self._default_max_retries, flood=flood)
            if isinstance(task_id, Refusal):
                await self._note_loop_write(conn)
                return task_id  # committed with its count; raised below
            if task_id is not None:
                return AddResult(task_id, True)
            holder = await fetch_one(conn, SQL_HOLDER_OF_KEY, {"key": new.source_key})
            return AddResult(None if holder is None or holder["id"] is None else int(holder["id"]), False)

        result = await self._db.write(body)
        if isinstance(result, Refusal):
            raise FloodLimited(f"task not added: {result.reason}")
        return result

    async def _add_alone(self, new: NewTask, now: int, actor: str) -> AddResult:
        """A task with nothing to check first (no parent, no dependency, no flood
        limit on its source): the insert alone, one statement in autocommit."""
        params = task_params(new, now, actor, self._default_max_retries)
        sql = SQL_ADD_TASK if new.dedup is DedupScope.OPEN else SQL_ADD_TASK_EVER
        row = await self._db.statement(lambda conn: fetch_one(conn, sql, params))
        if row is not None:
            return AddResult(int(row["id"]), True)
        holder = await self._db.read(lambda conn: fetch_one(conn, SQL_HOLDER_OF_KEY, {"key": new.source_key}))
        return AddResult(None if holder is None or holder["id"] is None else int(holder["id"]), False)

    async def add_tasks(self, news: Sequence[NewTask], *, actor: str) -> BatchResult:
        now = self._clock.now_ms()

        async def body(conn: Conn) -> BatchResult:
            flood = self._flood_gate(now)
            created = [await insert_task(conn, new, now, actor, self._default_max_retries, flood=flood) for new in news]
            ids = tuple(task_id for task_id in created if isinstance(task_id, int))
            rejected = sum(isinstance(task_id, Refusal) for task_id in created)
            if rejected:
                await self._note_loop_write(conn)
            return BatchResult(ids, len(news) - len(ids) - rejected, rejected)

        return await self._db.write(body)

    # --- reading ------------------------------------------------------------------
    async def _rows(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return await self._db.read(lambda conn: fetch_all(conn, sql, params))

    async def get_task(self, task_id: int) -> Task:
        return row_to_task(await self._db.read(lambda conn: require_task(conn, task_id)))

    async def list_tasks(
        self,
        *,
        statuses: Collection[TaskStatus] | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Task]:
        params = {"before_id": _NO_UPPER_ID if before_id is None else before_id, "limit": limit}
        wanted = list(statuses or TaskStatus)
        return [row_to_task(r) for r in await self._rows(list_tasks_sql(wanted), params)]

    async def search_tasks(
        self,
        text: str,
        *,
        statuses: Collection[TaskStatus] | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Task]:
        params = {
            "statuses": [str(s) for s in (statuses or TaskStatus)],
            "before_id": _NO_UPPER_ID if before_id is None else before_id,
            "pattern": "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",
            "limit": limit,
        }
        return [row_to_task(r) for r in await self._rows(SQL_SEARCH_TASKS, params)]

    async def queue(self, *, limit: int = 200) -> list[Task]:
        params = {"now": self._clock.now_ms(), "limit": limit}
        return [row_to_task(r) for r in await self._rows(SQL_QUEUE, params)]

    async def count_by_status(self) -> dict[TaskStatus, int]:
        counts = dict.fromkeys(TaskStatus, 0)
        counts.update({TaskStatus(r["status"]): int(r["n"]) for r in await self._rows(SQL_COUNT_BY_STATUS)})
        return counts

    async def next_due_at(self) -> int | None:
        rows = await self._rows(SQL_NEXT_DUE_AT)
        value = rows[0]["m"] if rows else None
        return None if value is None else int(value)

    async def list_runs(self, task_id: int) -> list[Run]:
        return [row_to_run(r) for r in await self._rows(SQL_LIST_RUNS, {"id": task_id})]

    async def list_events(self, task_id: int) -> list[TaskEvent]:
        return [row_to_task_event(r) for r in await self._rows(SQL_LIST_EVENTS, {"id": task_id})]

    async def events_after(
        self,
        after_id: int,
        *,
        since_ms: int | None = None,
        task_id: int | None = None,
        kinds: Collection[str] = (),
        limit: int = 500,
    ) -> list[TaskEvent]:
        params = {"after": after_id, "since": since_ms, "task": task_id, "kinds": list(kinds) or None, "limit": limit}
        return [row_to_task_event(r) for r in await self._rows(SQL_EVENTS_AFTER, params)]

    async def list_notes(self, task_id: int) -> list[Note]:
        return [row_to_note(r) for r in await self._rows(SQL_LIST_NOTES, {"id": task_id})]

    async def dependencies(self, task_id: int) -> list[int]:
        return [int(r["depends_on"]) for r in await self._rows(SQL_DEPENDENCIES, {"id": task_id})]

    async def cost_rollup(self, *, since_ms: int, by: CostGroup) -> list[CostRow]:
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
            for r in await self._rows(SQL_COST_ROLLUP[by], {"since": since_ms})
        ]

    async def data_version(self) -> int:
        """Moves when a notification of another session's commit has arrived (no
        round trip: the listening session counts them as they come)."""
        return self._db.data_version()

    # --- changing -----------------------------------------------------------------
    async def _change(
        self, task_id: int, action: str, allowed: Collection[TaskStatus], sql: str, **params: Any
    ) -> Task:
        """Run one conditional ``UPDATE … WHERE id AND status = ANY(allowed)
        RETURNING *``; if no row matched, raise ``InvalidTransition`` naming the status
        that refused it (or ``TaskNotFound``)."""
        values = {**params, "id": task_id, "now": self._clock.now_ms(), "allowed": [str(s) for s in allowed]}

        async def body(conn: Conn) -> Task:
            row = await fetch_one(conn, sql, values)
            if row is not None:
                return row_to_task(row)
            raise InvalidTransition(task_id, (await require_task(conn, task_id))["status"], action)

        try:
            return await self._db.write(body)
        except DuplicateOpenTask:
            raise DuplicateOpenTask(f"task #{task_id}: another open task already has its source key") from None

    async def cancel(self, task_id: int, *, actor: str) -> Task:
        return await self._change(task_id, "cancel", (), SQL_CANCEL, actor=actor)

    async def set_priority(self, task_id: int, priority: int, *, actor: str) -> Task:
        if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
            raise InputError(f"priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {priority}")
        pending_or_blocked = (TaskStatus.PENDING, TaskStatus.BLOCKED)
        return await self._change(
            task_id, "change its priority", pending_or_blocked, SQL_SET_PRIORITY, priority=priority, actor=actor
        )

    async def defer(self, task_id: int, until_ms: int, *, actor: str) -> Task:
        pending_or_blocked = (TaskStatus.PENDING, TaskStatus.BLOCKED)
        return await self._change(task_id, "defer it", pending_or_blocked, SQL_DEFER, until=until_ms, actor=actor)

    async def retry(self, task_id: int, *, actor: str) -> Task:
        finished = (TaskStatus.FAILED, TaskStatus.CANCELED)
        return await self._change(task_id, "retry it", finished, SQL_RETRY, actor=actor)

    async def close_task(self, task_id: int, status: TaskStatus, summary: str, *, actor: str) -> Task:
        if status not in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.BLOCKED):
            raise InputError(f"a task can be closed as completed, failed or blocked, not {status}")
        open_statuses = (TaskStatus.PENDING, TaskStatus.ACTIVE, TaskStatus.BLOCKED)
        return await self._change(
            task_id,
            f"close it as {status}",
            open_statuses,
            SQL_CLOSE_TASK,
            status=str(status),
            summary=summary,
            actor=actor,
        )

    async def request_retry(self, task_id: int, retry_at: int, summary: str, *, actor: str) -> Task:
        params = {"id": task_id, "retry_at": retry_at, "summary": summary, "now": self._clock.now_ms(), "actor": actor}

        async def body(conn: Conn) -> Task:
            row = await fetch_one(conn, SQL_REQUEST_RETRY, params)
            if row is None:
                current = await require_task(conn, task_id)
                status = "active with a cancel requested" if current["cancel_requested"] else current["status"]
                raise InvalidTransition(task_id, status, "ask for a retry (only a running task can)")
            return row_to_task(row)

        return await self._db.write(body)

    async def add_note(self, task_id: int, text: str, *, author: str) -> Note:
        if not text.strip():
            raise InputError("note text must not be empty")
        params = {"id": task_id, "now": self._clock.now_ms(), "author": author, "text": text}

        async def body(conn: Conn) -> Note:
            await require_task(conn, task_id)
            row = await fetch_one(conn, SQL_ADD_NOTE, params)
            assert row is not None
            return row_to_note(row)

        return await self._db.write(body)

    async def _approval(self, task_id: int, action: str, sql: str, **params: Any) -> Task:
        values = {**params, "id": task_id, "now": self._clock.now_ms()}

        async def body(conn: Conn) -> Task:
            row = await fetch_one(conn, sql, values)
            if row is None:
                raise await not_awaiting_approval(conn, task_id, action)
            return row_to_task(row)

        return await self._db.write(body)

    async def approve(self, task_id: int, *, actor: str) -> Task:
        return await self._approval(task_id, "approve it", SQL_APPROVE, actor=actor)

    async def reject(self, task_id: int, reason: str, *, actor: str) -> Task:
        if not reason.strip():
            raise InputError("a rejection needs a reason")
        summary = f"rejected: {reason.strip()}"
        return await self._approval(task_id, "reject it", SQL_REJECT, actor=actor, summary=summary)
