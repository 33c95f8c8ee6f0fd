"""The dispatcher's side of the PostgreSQL store: claims, leases, finishing,
requeueing, holding for approval and crash recovery. Each method is one
transaction; a claim alone is one statement.

Several dispatchers claim at once: the claim locks its row with ``FOR UPDATE SKIP
LOCKED`` and re-checks ``status = 'pending'`` in the same statement, so two can
never take the same task, and none waits for another's claim.
"""

from __future__ import annotations

from typing import Any

from vigil.errors import InputError, InvalidTransition, TaskNotFound
from vigil.models import (
    FINISHED_STATUSES,
    MAX_PRIORITY,
    MIN_PRIORITY,
    Claim,
    Note,
    Outcome,
    Run,
    Task,
    TaskStatus,
)
from vigil.store.postgres_base import PostgresBase, fetch_all, fetch_one, require_task
from vigil.store.postgres_costs import SQL_SPEND_SINCE
from vigil.store.postgres_db import Conn, Row
from vigil.store.postgres_queries import (
    SQL_ACTIVE_TASKS,
    SQL_CLAIM,
    SQL_CLAIM_IF_VERSION,
    SQL_DROP_OPEN_RUN,
    SQL_FINISH,
    SQL_GET_RUN_LOCKED,
    SQL_HOLD_FOR_APPROVAL,
    SQL_OPEN_RUNS,
    SQL_ORIGIN_OF,
    SQL_RECORD_RUN,
    SQL_RECOVER,
    SQL_RELEASE_CLOSED,
    SQL_RELEASE_UNRUN,
    SQL_RENEW_LEASE,
    SQL_REQUEUE,
    SQL_SET_EXECUTOR,
    SQL_SET_RUN_PROCESS,
)
from vigil.store.postgres_rows import row_to_run, row_to_task
from vigil.store.rows import run_record_values


def _claim_of(row: Row) -> Claim:
    notes = tuple(Note(**{name: n[name] for name in Note.__dataclass_fields__}) for n in row["claim_notes"])
    return Claim(task=row_to_task(row), run_id=int(row["run_id"]), attempt=int(row["run_attempt"]), notes=notes)


async def _finished(conn: Conn, row: Row | None, claim: Claim) -> Task:
    """The task ``SQL_FINISH`` returned, or as it is when its run was already
    recorded (a replayed claim changes nothing)."""
    return row_to_task(row if row is not None else await require_task(conn, claim.task.id))


class DispatchMethods(PostgresBase):
    """``Store`` methods used by the dispatch loop (mixed into ``PostgresStore``)."""

    def _claim_params(
        self, worker: str, lease_ms: int, executor: str | None, max_priority: int | None
    ) -> dict[str, Any]:
        if max_priority is not None and not MIN_PRIORITY <= max_priority <= MAX_PRIORITY:
            raise InputError(f"max_priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {max_priority}")
        now = self._clock.now_ms()
        return {
            "now": now,
            "worker": worker,
            "lease_until": now + lease_ms,
            "executor": executor,
            "max_priority": MAX_PRIORITY if max_priority is None else max_priority,
        }

    async def claim_next(
        self, *, worker: str, lease_ms: int, executor: str | None = None, max_priority: int | None = None
    ) -> Claim | None:
        params = self._claim_params(worker, lease_ms, executor, max_priority)
        # One statement in autocommit: its own transaction, one round trip.
        row = await self._db.statement(lambda conn: fetch_one(conn, SQL_CLAIM, params))
        return None if row is None else _claim_of(row)

    async def set_run_process(self, run_id: int, *, pid: int, pgid: int, proc_start: str | None) -> None:
        params = {"id": run_id, "pid": pid, "pgid": pgid, "proc_start": proc_start}
        await self._db.statement(lambda conn: conn.execute(SQL_SET_RUN_PROCESS, params))

    async def set_executor(self, claim: Claim, executor: str) -> None:
        params = {"executor": executor, "run_id": claim.run_id, "task_id": claim.task.id}
        await self._db.statement(lambda conn: conn.execute(SQL_SET_EXECUTOR, params))

    async def renew_lease(self, task_id: int, *, worker: str, lease_until: int) -> bool:
        params = {"id": task_id, "worker": worker, "lease_until": lease_until}

        async def body(conn: Conn) -> bool:
            row = await fetch_one(conn, SQL_RENEW_LEASE, params)
            if row is None:
                raise InvalidTransition(task_id, (await require_task(conn, task_id))["status"], "renew its lease")
            return bool(row["cancel_requested"])

        return await self._db.statement(body)  # one UPDATE; the read only explains a refusal

    async def _record_run(self, conn: Conn, claim: Claim, outcome: Outcome, now: int) -> bool:
        """Record the outcome on the claim's run and add its costs to the task (one
        statement); False (nothing written) when that run was already recorded."""
        return await fetch_one(conn, SQL_RECORD_RUN, run_record_values(claim, outcome, now)) is not None

    async def finish(self, claim: Claim, outcome: Outcome, status: TaskStatus, *, worker: str) -> Task:
        params = self._finish_params(claim, outcome, status, worker)

        async def body(conn: Conn) -> Task:
            return await _finished(conn, await fetch_one(conn, SQL_FINISH, params), claim)

        # One statement (SQL_FINISH) in autocommit: its own transaction, one round trip.
        return await self._db.statement(body)

    def _finish_params(self, claim: Claim, outcome: Outcome, status: TaskStatus, worker: str) -> dict[str, Any]:
        """The parameters of ``SQL_FINISH`` (the status validated here)."""
        if status not in FINISHED_STATUSES:
            raise InputError(f"finish takes completed, failed or canceled, not {status}")
        return {
            **run_record_values(claim, outcome, self._clock.now_ms()),
            "worker": worker,
            "status": str(status),
            "summary": outcome.summary,
            "detail": outcome.detail,
        }

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
        finish_params = self._finish_params(claim, outcome, status, worker)
        params = self._claim_params(worker, lease_ms, executor, max_priority)
        claim_sql = SQL_CLAIM
        if if_version is not None:
            claim_sql = SQL_CLAIM_IF_VERSION
            params["versions"] = self._versions_unchanged_since(if_version)

        async def body(conn: Conn) -> tuple[Task, Claim | None]:
            # Pipelined: both statements go out together and run in order, so the
            # claim sees the dependents the finish unblocked.
            finishing = await conn.execute(SQL_FINISH, finish_params)
            claiming = await conn.execute(claim_sql, params)
            finished = await finishing.fetchone()
            claimed = await claiming.fetchone()
            return await _finished(conn, finished, claim), None if claimed is None else _claim_of(claimed)

        return await self._db.write(body, pipelined=True)

    async def requeue(self, claim: Claim, outcome: Outcome, *, retry_at: int, count_attempt: bool, worker: str) -> Task:
        now = self._clock.now_ms()
        params = {
            "now": now,
            "task_id": claim.task.id,
            "worker": worker,
            "retry_at": retry_at,
            "give_back": 0 if count_attempt else 1,
            "summary": outcome.summary or None,
        }

        async def body(conn: Conn) -> Task:
            if not await self._record_run(conn, claim, outcome, now):
                return row_to_task(await require_task(conn, claim.task.id))  # a replayed claim
            row = await fetch_one(conn, SQL_REQUEUE, params)
            if row is not None:
                return row_to_task(row)
            await conn.execute(SQL_RELEASE_CLOSED, params)
            return row_to_task(await require_task(conn, claim.task.id))

        return await self._db.write(body)

    async def _put_back(self, claim: Claim, sql: str, action: str, **extra: Any) -> Task:
        params = {"now": self._clock.now_ms(), "task_id": claim.task.id, "run_id": claim.run_id, **extra}

        async def body(conn: Conn) -> Task:
            row = await fetch_one(conn, sql, params)
            if row is None:
                raise InvalidTransition(claim.task.id, (await require_task(conn, claim.task.id))["status"], action)
            await conn.execute(SQL_DROP_OPEN_RUN, params)
            return row_to_task(row)

        return await self._db.write(body)

    async def hold_for_approval(self, claim: Claim, *, worker: str) -> Task:
        return await self._put_back(claim, SQL_HOLD_FOR_APPROVAL, "hold it", worker=worker)

    async def release_unrun(self, claim: Claim, *, worker: str, retry_at: int) -> Task:
        return await self._put_back(claim, SQL_RELEASE_UNRUN, "release it", worker=worker, retry_at=retry_at)

    async def spend_since(self, since_ms: int) -> float:
        row = await self._db.read(lambda conn: fetch_one(conn, SQL_SPEND_SINCE, {"since": since_ms}))
        return 0.0 if row is None else float(row["spent"])

    async def origin_of(self, task_id: int) -> str:
        row = await self._db.read(lambda conn: fetch_one(conn, SQL_ORIGIN_OF, {"id": task_id}))
        if row is None:
            raise TaskNotFound(task_id)
        return str(row["source"])

    async def active_tasks(self) -> list[Task]:
        return [row_to_task(r) for r in await self._db.read(lambda conn: fetch_all(conn, SQL_ACTIVE_TASKS))]

    async def open_runs(self) -> list[Run]:
        return [row_to_run(r) for r in await self._db.read(lambda conn: fetch_all(conn, SQL_OPEN_RUNS))]

    async def recover(self, run_id: int, outcome: Outcome, *, status: TaskStatus, retry_at: int | None = None) -> Task:
        if status not in (TaskStatus.PENDING, TaskStatus.FAILED, TaskStatus.CANCELED):
            raise InputError(f"recover takes pending, failed or canceled, not {status}")
        if status is TaskStatus.PENDING and retry_at is None:
            raise InputError("recovering a task as pending needs a retry time")
        now = self._clock.now_ms()

        async def body(conn: Conn) -> Task:
            run = await fetch_one(conn, SQL_GET_RUN_LOCKED, {"id": run_id})
            if run is None:
                raise InputError(f"run {run_id} not found")
            task = row_to_task(await require_task(conn, run["task_id"]))
            if run["finished_at"] is not None:
                return task
            await self._record_run(conn, Claim(task=task, run_id=run_id, attempt=run["attempt"]), outcome, now)
            params = {
                "now": now,
                "task_id": task.id,
                "worker": run["claimed_by"],
                "status": str(status),
                "retry_at": retry_at,
                "summary": outcome.summary or None,
            }
            if (await conn.execute(SQL_RECOVER, params)).rowcount == 0 and run["claimed_by"] is not None:
                await conn.execute(SQL_RELEASE_CLOSED, params)  # the agent closed it: keep its status
            return row_to_task(await require_task(conn, task.id))

        return await self._db.write(body)
