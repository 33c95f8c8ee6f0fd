"""The dispatcher's side of the store, written once for every backend: claims,
leases, finishing, requeueing, holding for approval and crash recovery.

Blocking, like ``tasks.Tasks``; the async stores run each call whole in their
worker thread (``threaded.AsyncDispatching``). Each method is one transaction. The
claim itself is each backend's own statement (``claim`` in its queries module:
PostgreSQL's skips rows other dispatchers are claiming); what follows a claim is
shared. The guarantees are those of the ``vigil.store.Store`` protocol.
"""

from __future__ import annotations

from collections.abc import Callable

from vigil.clock import Clock
from vigil.errors import InputError, InvalidTransition, TaskNotFound
from vigil.faults import crash_point
from vigil.models import FINISHED_STATUSES, MAX_PRIORITY, MIN_PRIORITY, Claim, Outcome, Run, Task, TaskStatus
from vigil.store.rows import row_to_run, run_record_values
from vigil.store.tasks import require_task, task_of
from vigil.store.transaction import Engine, Tx


def _record_run(tx: Tx, claim: Claim, outcome: Outcome, now: int) -> bool:
    """Record the outcome on the claim's run and add its costs to the task; False
    (and nothing written) when that run was already recorded."""
    values = run_record_values(claim, outcome, now)
    if tx.run(tx.q.SQL_RECORD_RUN, values) == 0:
        return False
    tx.run(tx.q.SQL_ADD_COSTS, values)
    return True


def _finish(
    tx: Tx, claim: Claim, outcome: Outcome, status: TaskStatus, *, worker: str, now: int, sql: str | None = None
) -> Task:
    """Record the outcome on the claim's run and finish its task (``sql``: another
    ending than SQL_FINISH, with its parameters), adding the run's costs in the same
    ``UPDATE``; the task as it is when the run was already recorded (a replayed claim)."""
    values = run_record_values(claim, outcome, now)
    if tx.run(tx.q.SQL_RECORD_RUN, values) == 0:
        return task_of(tx, require_task(tx, claim.task.id))
    values.update(worker=worker, status=str(status), summary=outcome.summary, detail=outcome.detail)
    finished = tx.one(sql or tx.q.SQL_FINISH, values)
    if finished is None:  # the agent closed it: keep its status, add the costs apart
        tx.run(tx.q.SQL_ADD_COSTS, values)
        tx.run(tx.q.SQL_RELEASE_CLOSED, values)
        finished = require_task(tx, claim.task.id)
    crash_point("during-finish")
    return task_of(tx, finished)


class Dispatching:
    """The dispatch methods of ``Store``, blocking, over one backend's ``Engine``."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock

    def _claim_body(
        self, worker: str, lease_ms: int, executor: str | None, max_priority: int | None
    ) -> Callable[[Tx], Claim | None]:
        """The body of a claim, to run inside a write transaction (validated here)."""
        if max_priority is not None and not MIN_PRIORITY <= max_priority <= MAX_PRIORITY:
            raise InputError(f"max_priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {max_priority}")
        now = self._clock.now_ms()
        params = {
            "now": now,
            "worker": worker,
            "lease_until": now + lease_ms,
            "executor": executor,
            "max_priority": MAX_PRIORITY if max_priority is None else max_priority,
        }
        return lambda tx: tx.q.claim(tx, params)

    def claim_next(
        self, *, worker: str, lease_ms: int, executor: str | None = None, max_priority: int | None = None
    ) -> Claim | None:
        return self._engine.write(self._claim_body(worker, lease_ms, executor, max_priority))

    def set_run_process(
        self, run_id: int, *, pid: int, pgid: int, proc_start: str | None, workspace: str | None = None
    ) -> None:
        params = {"id": run_id, "pid": pid, "pgid": pgid, "proc_start": proc_start, "workspace": workspace}
        self._engine.write(lambda tx: tx.run(tx.q.SQL_SET_RUN_PROCESS, params))

    def set_executor(self, claim: Claim, executor: str) -> None:
        params = {"executor": executor, "run_id": claim.run_id, "task_id": claim.task.id}

        def body(tx: Tx) -> None:
            tx.run(tx.q.SQL_SET_RUN_EXECUTOR, params)
            tx.run(tx.q.SQL_SET_TASK_EXECUTOR, params)

        self._engine.write(body)

    def renew_lease(self, task_id: int, *, worker: str, lease_until: int) -> bool:
        params = {"id": task_id, "worker": worker, "lease_until": lease_until}

        def body(tx: Tx) -> bool:
            row = tx.one(tx.q.SQL_RENEW_LEASE, params)
            if row is None:
                raise InvalidTransition(task_id, require_task(tx, task_id)["status"], "renew its lease")
            return bool(row["cancel_requested"])

        return self._engine.write(body)

    def _finish_body(self, claim: Claim, outcome: Outcome, status: TaskStatus, worker: str) -> Callable[[Tx], Task]:
        """The body of a finish, to run inside a write transaction (validated here)."""
        if status not in FINISHED_STATUSES:
            raise InputError(f"finish takes completed, failed or canceled, not {status}")
        now = self._clock.now_ms()
        return lambda tx: _finish(tx, claim, outcome, status, worker=worker, now=now)

    def finish(self, claim: Claim, outcome: Outcome, status: TaskStatus, *, worker: str) -> Task:
        return self._engine.write(self._finish_body(claim, outcome, status, worker))

    def hold_for_review(self, claim: Claim, outcome: Outcome, *, worker: str) -> Task:
        now = self._clock.now_ms()
        return self._engine.write(
            lambda tx: _finish(
                tx, claim, outcome, TaskStatus.BLOCKED, worker=worker, now=now, sql=tx.q.SQL_HOLD_FOR_REVIEW
            )
        )

    def finish_and_claim(
        self,
        claim: Claim,
        outcome: Outcome,
        status: TaskStatus,
        *,
        worker: str,
        lease_ms: int,
        executor: str | None = None,
        max_priority: int | None = None,
    ) -> tuple[Task, Claim | None]:
        finish = self._finish_body(claim, outcome, status, worker)
        claim_next = self._claim_body(worker, lease_ms, executor, max_priority)
        # In order, in one transaction: the claim sees the dependents the finish unblocked.
        return self._engine.write(lambda tx: (finish(tx), claim_next(tx)))

    def requeue(self, claim: Claim, outcome: Outcome, *, retry_at: int, count_attempt: bool, worker: str) -> Task:
        now = self._clock.now_ms()
        params = {
            "now": now,
            "task_id": claim.task.id,
            "worker": worker,
            "retry_at": retry_at,
            "give_back": 0 if count_attempt else 1,
            "summary": outcome.summary or None,
        }

        def body(tx: Tx) -> Task:
            if _record_run(tx, claim, outcome, now) and tx.run(tx.q.SQL_REQUEUE, params) == 0:
                tx.run(tx.q.SQL_RELEASE_CLOSED, params)  # the agent closed it: keep its status
            return task_of(tx, require_task(tx, claim.task.id))  # as it is, for a replayed claim too

        return self._engine.write(body)

    def _put_back(self, claim: Claim, worker: str, action: str, sql: str, retry_at: int | None = None) -> Task:
        """Put a claimed task back unrun (``sql``), its open run removed."""
        params = {
            "now": self._clock.now_ms(),
            "task_id": claim.task.id,
            "run_id": claim.run_id,
            "worker": worker,
            "retry_at": retry_at,
        }

        def body(tx: Tx) -> Task:
            row = tx.one(sql, params)
            if row is None:
                raise InvalidTransition(claim.task.id, require_task(tx, claim.task.id)["status"], action)
            tx.run(tx.q.SQL_DROP_OPEN_RUN, params)
            return task_of(tx, row)

        return self._engine.write(body)

    def hold_for_approval(self, claim: Claim, *, worker: str) -> Task:
        return self._put_back(claim, worker, "hold it", self._engine.q.SQL_HOLD_FOR_APPROVAL)

    def release_unrun(self, claim: Claim, *, worker: str, retry_at: int) -> Task:
        return self._put_back(claim, worker, "release it", self._engine.q.SQL_RELEASE_UNRUN, retry_at)

    def spend_since(self, since_ms: int) -> float:
        row = self._engine.read(lambda tx: tx.one(tx.q.SQL_SPEND_SINCE, {"since": since_ms}))
        return 0.0 if row is None or row["spent"] is None else float(row["spent"])

    def origin_of(self, task_id: int) -> str:
        row = self._engine.read(lambda tx: tx.one(tx.q.SQL_ORIGIN_OF, {"id": task_id}))
        if row is None:
            raise TaskNotFound(task_id)
        return str(row["source"])

    def active_tasks(self) -> list[Task]:
        return self._engine.read(lambda tx: [task_of(tx, r) for r in tx.all(tx.q.SQL_ACTIVE_TASKS)])

    def open_runs(self) -> list[Run]:
        return self._engine.read(lambda tx: [row_to_run(r) for r in tx.all(tx.q.SQL_OPEN_RUNS)])

    def recover(self, run_id: int, outcome: Outcome, *, status: TaskStatus, retry_at: int | None = None) -> Task:
        if status not in (TaskStatus.PENDING, TaskStatus.FAILED, TaskStatus.CANCELED):
            raise InputError(f"recover takes pending, failed or canceled, not {status}")
        if status is TaskStatus.PENDING and retry_at is None:
            raise InputError("recovering a task as pending needs a retry time")
        now = self._clock.now_ms()

        def body(tx: Tx) -> Task:
            run = tx.one(tx.q.SQL_GET_RUN_FOR_UPDATE, {"id": run_id})
            if run is None:
                raise InputError(f"run {run_id} not found")
            task = task_of(tx, require_task(tx, run["task_id"]))
            if run["finished_at"] is not None:
                return task
            _record_run(tx, Claim(task=task, run_id=run_id, attempt=run["attempt"]), outcome, now)
            params = {
                "now": now,
                "task_id": task.id,
                "worker": run["claimed_by"],
                "status": str(status),
                "retry_at": retry_at,
                "summary": outcome.summary or None,
            }
            if tx.run(tx.q.SQL_RECOVER, params) == 0 and run["claimed_by"] is not None:
                tx.run(tx.q.SQL_RELEASE_CLOSED, params)  # the agent closed it: keep its status
            return task_of(tx, require_task(tx, task.id))

        return self._engine.write(body)
