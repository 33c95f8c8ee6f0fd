"""The dispatcher's side of the store, written once for every backend: claims,
leases, recording an attempt, putting a task back unrun, and crash recovery.

Blocking, like ``tasks.Tasks``; the async stores run each call whole in their
worker thread. Each method is one transaction. The claim itself is each backend's
own statement (``claim`` in its queries module: PostgreSQL's skips rows other
dispatchers are claiming); what follows a claim is shared.

Whatever ends a claim — an attempt recorded, a dead dispatcher's run recovered, a
task put back before it ran — goes through ``_settle``: the task is read (locked) in
the transaction, ``vigil.fate`` decides what becomes of it, and ``SQL_SETTLE``
writes that, guarded by the claimant. A task no longer active under the claimant
(its agent closed it during the run) keeps its status; only the claim is let go.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vigil.clock import Clock
from vigil.codework import Worktree
from vigil.errors import InputError, InvalidTransition, TaskNotFound
from vigil.fate import Fate, Policy, Recorded, after_attempt, put_back, recorded_as
from vigil.faults import crash_point
from vigil.models import MAX_PRIORITY, MIN_PRIORITY, Claim, GitHubLink, Outcome, OutcomeKind, Run, Task, TaskStatus
from vigil.store.rows import row_to_run, run_record_values
from vigil.store.sql.costs import SPEND_SINCE
from vigil.store.sql.runs import (
    ACTIVE_TASKS,
    ADD_COSTS,
    CLAIM_RUN_OPEN,
    DROP_OPEN_RUN,
    GET_RUN,
    GET_RUN_FOR_UPDATE,
    OPEN_RUNS,
    ORIGIN_OF,
    RECORD_RUN,
    RELEASE_CLOSED,
    RENEW_LEASE,
    REOPEN_AGENT_CLOSED,
    SET_GITHUB,
    SET_RUN_EXECUTOR,
    SET_RUN_PROCESS,
    SET_TASK_EXECUTOR,
    SET_WORKTREE,
    SETTLE,
)
from vigil.store.tasks import require_task, task_of
from vigil.store.transaction import Engine, Tx

NO_COSTS = {
    "cost_usd": 0.0,
    "api_cost_usd": 0.0,
    "tokens_in": 0,
    "tokens_out": 0,
    "denials": 0,
    "model": None,
    "detail": None,
}


def _settle(
    tx: Tx, task_id: int, worker: str | None, decide: Callable[[Task], Fate], *, values: dict[str, Any], now: int
) -> tuple[Task, Fate | None]:
    """Decide and write the fate of claimed task ``task_id``; ``values`` hold the
    run's costs (``run_record_values``, or ``NO_COSTS``). Returns the task as it now
    is and the fate written (None: the task was no longer the claimant's to settle)."""
    task = task_of(tx, require_task(tx, task_id, lock=True))
    if task.status is not TaskStatus.ACTIVE or task.claimed_by != worker:
        # its agent closed it during the run (or another claim holds it): keep its status
        tx.run(ADD_COSTS, {**values, "task_id": task_id, "now": now})
        if worker is not None:
            tx.run(RELEASE_CLOSED, {"task_id": task_id, "worker": worker})
        return task_of(tx, require_task(tx, task_id)), None
    fate = decide(task)
    params = {
        **values,
        "task_id": task_id,
        "worker": worker,
        "now": now,
        "status": str(fate.status),
        "retry_at": fate.retry_at,
        "give_back": 0 if fate.count_attempt else 1,
        "summary": fate.summary,
        "review": int(fate.review),
        "approval": int(fate.approval),
    }
    row = tx.one(SETTLE, params)
    assert row is not None  # the row is locked, active and ours
    crash_point("during-finish")
    return task_of(tx, row), fate


class Dispatching:
    """The dispatch methods of the store, blocking, over one backend's ``Engine``."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock

    def claim_next(
        self,
        *,
        worker: str,
        lease_ms: int,
        executor: str | None = None,
        max_priority: int | None = None,
        by_person: bool = False,
    ) -> Claim | None:
        """Claim the most urgent due task (priority, then due time, then id; only
        due tasks with no unfinished dependency; with ``max_priority`` only those at
        least that urgent; with ``by_person`` only those a person made as urgent as
        they are: added or reprioritised by a person, ``PERSON_SET_PRIORITY``),
        mark it active under ``worker`` until ``now + lease_ms``, count the attempt
        and open its run, in one transaction. None: nothing due."""
        if max_priority is not None and not MIN_PRIORITY <= max_priority <= MAX_PRIORITY:
            raise InputError(f"max_priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {max_priority}")
        now = self._clock.now_ms()
        params = {
            "now": now,
            "worker": worker,
            "lease_until": now + lease_ms,
            "executor": executor,
            "max_priority": MAX_PRIORITY if max_priority is None else max_priority,
            "anyone": not by_person,
        }

        def body(tx: Tx) -> Claim | None:
            claimed = self._engine.claim(tx, params)
            if claimed is None:
                return None
            row, run = claimed
            return Claim(task=task_of(tx, row), run_id=int(run["id"]), attempt=int(run["attempt"]))

        return self._engine.write(body)

    def set_run_process(
        self,
        run_id: int,
        *,
        pid: int,
        pgid: int,
        proc_start: str | None,
        workspace: str | None = None,
        gated: bool = False,
    ) -> None:
        """Record the executor's process (group) on the run, for crash recovery, the
        ``workspace`` its agent works in (None: keep what is recorded), and whether
        the run's result is ``gated`` by checks or a person's review (then the
        agent's own close as completed does not close the task)."""
        params = {
            "id": run_id,
            "pid": pid,
            "pgid": pgid,
            "proc_start": proc_start,
            "workspace": workspace,
            "gated": int(gated),
        }
        self._engine.write(lambda tx: tx.run(SET_RUN_PROCESS, params))

    def set_worktree(self, task_id: int, worktree: Worktree) -> Task:
        """Record the git worktree Vigil made (or made again) for the task; returns
        the task. Raises ``TaskNotFound``."""
        params = {"id": task_id, "worktree": worktree.to_json()}

        def body(tx: Tx) -> Task:
            row = tx.one(SET_WORKTREE, params)
            if row is None:
                raise TaskNotFound(task_id)
            return task_of(tx, row)

        return self._engine.write(body)

    def set_github(self, task_id: int, link: GitHubLink) -> Task:
        """Record where the task meets GitHub (its issue, its pull request); returns
        the task. Raises ``TaskNotFound``."""
        params = {"id": task_id, "github": link.to_json()}

        def body(tx: Tx) -> Task:
            row = tx.one(SET_GITHUB, params)
            if row is None:
                raise TaskNotFound(task_id)
            return task_of(tx, row)

        return self._engine.write(body)

    def set_executor(self, claim: Claim, executor: str) -> None:
        """Record the executor that runs ``claim``'s attempt on its run and, while the
        task is still active, on the task (the claim stored the configured default; a
        skill may choose another)."""
        params = {"executor": executor, "run_id": claim.run_id, "task_id": claim.task.id}

        def body(tx: Tx) -> None:
            tx.run(SET_RUN_EXECUTOR, params)
            tx.run(SET_TASK_EXECUTOR, params)

        self._engine.write(body)

    def renew_lease(self, task_id: int, *, worker: str, lease_until: int) -> bool:
        """Extend the lease of a task ``worker`` holds; returns whether a cancel was
        requested. Raises ``InvalidTransition`` if the worker no longer holds it."""
        params = {"id": task_id, "worker": worker, "lease_until": lease_until}

        def body(tx: Tx) -> bool:
            row = tx.one(RENEW_LEASE, params)
            if row is None:
                raise InvalidTransition(task_id, require_task(tx, task_id)["status"], "renew its lease")
            return bool(row["cancel_requested"])

        return self._engine.write(body)

    def record(self, claim: Claim, outcome: Outcome, *, worker: str, policy: Policy | None = None) -> Recorded:
        """Record ``outcome`` on the claim's run and settle its task as ``vigil.fate``
        decides under ``policy`` (None: the default settings), adding the run's costs,
        in one transaction; returns what that came to (the task, the outcome as
        recorded, the fate written). A task its agent closed during the run keeps its
        status, but for a close as completed in a run whose sandbox failed
        (``sandbox_failed``): that close is void, and the task is settled as the
        attempt's outcome says. A claim whose run is already recorded changes nothing
        (a replay never counts costs twice); the task is returned as it is, with no fate."""
        now = self._clock.now_ms()
        rules = policy or Policy()

        def body(tx: Tx) -> Recorded:
            task = task_of(tx, require_task(tx, claim.task.id, lock=True))
            recorded = recorded_as(task, claim.run_id, outcome)
            values = run_record_values(claim, recorded, now)
            run = tx.one(GET_RUN, {"id": claim.run_id})
            closed_by_agent = None if run is None else run["agent_status"]
            if tx.run(RECORD_RUN, values) == 0:
                return Recorded(task, recorded, None)
            if recorded.kind is OutcomeKind.SANDBOX_FAILED and closed_by_agent == "completed":
                # whatever its agent said, its commands never ran: the close is void
                tx.run(REOPEN_AGENT_CLOSED, {"task_id": task.id, "worker": worker, "now": now})
            decide: Callable[[Task], Fate] = lambda t: after_attempt(t, recorded, rules, now)  # noqa: E731
            settled, fate = _settle(tx, claim.task.id, worker, decide, values=values, now=now)
            return Recorded(settled, recorded, fate)

        return self._engine.write(body)

    def put_back(self, claim: Claim, *, worker: str, until: int | None) -> Task:
        """Put a claimed task back before it ran, in one transaction: its open run
        removed and its attempt given back; due again at ``until`` (epoch ms), or
        with ``until`` None blocked until a person approves it (``vigil.fate.put_back``;
        a cancel requested since the claim wins). Raises ``InvalidTransition`` if this
        worker no longer holds it or the claim's run is no longer open (a stale claim)."""
        now = self._clock.now_ms()
        params = {"task_id": claim.task.id, "run_id": claim.run_id}
        action = "hold it" if until is None else "put it back"

        def body(tx: Tx) -> Task:
            task = task_of(tx, require_task(tx, claim.task.id, lock=True))
            stale = tx.one(CLAIM_RUN_OPEN, params) is None
            if stale or task.status is not TaskStatus.ACTIVE or task.claimed_by != worker:
                raise InvalidTransition(task.id, task.status, action)
            settled, _ = _settle(
                tx, task.id, worker, lambda t: put_back(t, until=until), values=dict(NO_COSTS), now=now
            )
            tx.run(DROP_OPEN_RUN, params)
            return settled

        return self._engine.write(body)

    def spend_since(self, since_ms: int) -> float:
        """USD of the runs finished since ``since_ms``, the cost archive included."""
        row = self._engine.read(lambda tx: tx.one(SPEND_SINCE, {"since": since_ms}))
        return 0.0 if row is None or row["spent"] is None else float(row["spent"])

    def origin_of(self, task_id: int) -> str:
        """The source of the root of the task's parent chain. Raises ``TaskNotFound``."""
        row = self._engine.read(lambda tx: tx.one(ORIGIN_OF, {"id": task_id}))
        if row is None:
            raise TaskNotFound(task_id)
        return str(row["source"])

    def active_tasks(self) -> list[Task]:
        """Every active task (for crash recovery and status)."""
        return self._engine.read(lambda tx: [task_of(tx, r) for r in tx.all(ACTIVE_TASKS)])

    def open_runs(self) -> list[Run]:
        """Runs not yet recorded, oldest first (crash recovery's candidates)."""
        return self._engine.read(lambda tx: [row_to_run(r) for r in tx.all(OPEN_RUNS)])

    def recover(self, run_id: int, outcome: Outcome, *, policy: Policy | None = None) -> Task:
        """Record a dead dispatcher's open run as ``outcome`` and settle its task as
        ``vigil.fate`` decides, while that dispatcher still holds it, in one
        transaction. Idempotent: a run already recorded changes nothing. Raises
        ``InputError`` for an unknown run."""
        now = self._clock.now_ms()
        rules = policy or Policy()

        def body(tx: Tx) -> Task:
            run = tx.one(GET_RUN_FOR_UPDATE, {"id": run_id})
            if run is None:
                raise InputError(f"run {run_id} not found")
            task = task_of(tx, require_task(tx, run["task_id"], lock=True))
            if run["finished_at"] is not None:
                return task
            recorded = recorded_as(task, run_id, outcome)
            values = run_record_values(Claim(task=task, run_id=run_id, attempt=run["attempt"]), recorded, now)
            tx.run(RECORD_RUN, values)
            decide: Callable[[Task], Fate] = lambda t: after_attempt(t, recorded, rules, now)  # noqa: E731
            return _settle(tx, task.id, run["claimed_by"], decide, values=values, now=now)[0]

        return self._engine.write(body)
