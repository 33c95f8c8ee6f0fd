"""The dispatcher's side of the SQLite store: claims, leases, finishing, requeueing,
holding for approval and crash recovery. Each method is one transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from vigil.errors import InputError, InvalidTransition, TaskNotFound
from vigil.faults import crash_point
from vigil.models import (
    FINISHED_STATUSES,
    MAX_PRIORITY,
    MIN_PRIORITY,
    Claim,
    Outcome,
    Run,
    Task,
    TaskStatus,
)
from vigil.store.rows import run_record_values
from vigil.store.sqlite_base import SqliteBase, data_version_of, require_task
from vigil.store.sqlite_queries import (
    SQL_ADD_COSTS,
    SQL_CLAIM,
    SQL_CLAIM_UP_TO,
    SQL_DROP_OPEN_RUN,
    SQL_FINISH,
    SQL_HOLD_FOR_APPROVAL,
    SQL_LIST_NOTES,
    SQL_OPEN_RUN,
    SQL_OPEN_RUNS,
    SQL_ORIGIN_OF,
    SQL_RECORD_RUN,
    SQL_RECOVER,
    SQL_RELEASE_CLOSED,
    SQL_RELEASE_UNRUN,
    SQL_REQUEUE,
    SQL_SPEND_SINCE,
)
from vigil.store.sqlite_rows import (
    row_to_note,
    row_to_run,
    row_to_task,
)


class DispatchMethods(SqliteBase):
    """``Store`` methods used by the dispatch loop (mixed into ``SqliteStore``)."""

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

    async def set_executor(self, claim: Claim, executor: str) -> None:
        def body(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE runs SET executor = ? WHERE id = ?", (executor, claim.run_id))
            conn.execute("UPDATE tasks SET executor = ? WHERE id = ? AND status = 'active'", (executor, claim.task.id))

        await self._db.write(body)

    async def renew_lease(self, task_id: int, *, worker: str, lease_until: int) -> bool:
        def body(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                """UPDATE tasks SET lease_until = ? WHERE id = ? AND claimed_by = ?
                   RETURNING cancel_requested""",
                (lease_until, task_id, worker),
            ).fetchone()
            if row is None:
                raise InvalidTransition(task_id, require_task(conn, task_id)["status"], "renew its lease")
            return bool(row[0])

        return await self._db.write(body)

    def _record_run(self, conn: sqlite3.Connection, claim: Claim, outcome: Outcome, now: int) -> bool:
        """Record the outcome on the claim's run and add its costs to the task; False
        (and nothing written) when that run was already recorded."""
        values = run_record_values(claim, outcome, now)
        if conn.execute(SQL_RECORD_RUN, values).rowcount == 0:
            return False
        conn.execute(SQL_ADD_COSTS, values)
        return True

    def _finish_run(
        self, conn: sqlite3.Connection, claim: Claim, outcome: Outcome, *, status: TaskStatus, worker: str, now: int
    ) -> Task:
        """Record the outcome on the claim's run and finish its task, adding the run's
        costs in the same ``UPDATE``; the task as it is when the run was already
        recorded (a replayed claim)."""
        values = run_record_values(claim, outcome, now)
        if conn.execute(SQL_RECORD_RUN, values).rowcount == 0:
            return row_to_task(require_task(conn, claim.task.id))
        values.update(worker=worker, status=str(status), summary=outcome.summary, detail=outcome.detail)
        finished = conn.execute(SQL_FINISH, values).fetchone()
        if finished is None:  # the agent closed it: keep its status, add the costs apart
            conn.execute(SQL_ADD_COSTS, values)
            conn.execute(SQL_RELEASE_CLOSED, values)
            finished = require_task(conn, claim.task.id)
        crash_point("during-finish")
        return row_to_task(finished)

    async def finish(self, claim: Claim, outcome: Outcome, status: TaskStatus, *, worker: str) -> Task:
        return await self._db.write(self._finish_body(claim, outcome, status, worker))

    def _finish_body(
        self, claim: Claim, outcome: Outcome, status: TaskStatus, worker: str
    ) -> Callable[[sqlite3.Connection], Task]:
        """The body of a finish, to run inside a write transaction (validated here)."""
        if status not in FINISHED_STATUSES:
            raise InputError(f"finish takes completed, failed or canceled, not {status}")
        now = self._clock.now_ms()

        return lambda conn: self._finish_run(conn, claim, outcome, status=status, worker=worker, now=now)

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
            if if_version is not None and data_version_of(conn) != if_version:
                return finished, None
            return finished, claim_next(conn)

        return await self._db.write(body)

    async def requeue(self, claim: Claim, outcome: Outcome, *, retry_at: int, count_attempt: bool, worker: str) -> Task:
        now = self._clock.now_ms()

        def body(conn: sqlite3.Connection) -> Task:
            if not self._record_run(conn, claim, outcome, now):
                return row_to_task(require_task(conn, claim.task.id))  # a replayed claim
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
            return row_to_task(require_task(conn, claim.task.id))

        return await self._db.write(body)

    async def hold_for_approval(self, claim: Claim, *, worker: str) -> Task:
        params = {"now": self._clock.now_ms(), "task_id": claim.task.id, "run_id": claim.run_id, "worker": worker}

        def body(conn: sqlite3.Connection) -> Task:
            row = conn.execute(SQL_HOLD_FOR_APPROVAL, params).fetchone()
            if row is None:
                raise InvalidTransition(claim.task.id, require_task(conn, claim.task.id)["status"], "hold it")
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
                raise InvalidTransition(claim.task.id, require_task(conn, claim.task.id)["status"], "release it")
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
            task = row_to_task(require_task(conn, run["task_id"]))
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
            return row_to_task(require_task(conn, task.id))

        return await self._db.write(body)
