"""Crash recovery: settle the runs a dead dispatcher left open.

Called after taking the dispatcher lock (on start-up and on take-over). Holding the
lock means no live dispatcher owns any open run, so each one belongs to a dead
process. For each:

1. if the run's agent process group is still alive, end it, but only when it is
   provably the same group: the leader is alive with the recorded start time, or
   the leader is gone while its group lives on (Linux does not hand out a pid that
   is still some group's id, so the group cannot belong to a stranger);
2. record the run as ``interrupted`` ("dispatcher died (worker …)") and requeue the
   task due now with the attempt counted, or fail it when attempts are exhausted, or
   cancel it when a person had asked to. A task its agent already closed keeps the
   status it was given.

The attempt is counted so that a task which keeps killing its dispatcher ends up
failed instead of looping forever.
"""

from __future__ import annotations

import logging

from dispatch.process import end_process_group, group_alive, pid_alive, same_process
from dispatch.retry import attempts_left, gave_up
from vigil.clock import Clock
from vigil.models import Outcome, OutcomeKind, Run, Task, TaskStatus
from vigil.store import Store

log = logging.getLogger("vigil.dispatch")

GROUP_GRACE_S = 5.0  # SIGTERM → SIGKILL for an orphaned agent group


def _ours_to_end(run: Run) -> bool:
    """Whether the run's process group is alive and provably the one recorded."""
    if run.pgid is None or run.pid is None or not group_alive(run.pgid):
        return False
    if same_process(run.pid, run.proc_start):
        return True
    # Leader gone but its group alive: members of the original group (see above).
    # A live leader with another start time is a reused pid: never signal it.
    return run.pid == run.pgid and not pid_alive(run.pid)


async def recover_orphans(store: Store, clock: Clock, *, grace_s: float = GROUP_GRACE_S) -> list[Task]:
    """Settle every open run; returns the tasks as recovered. Call only while holding
    the dispatcher lock."""
    recovered = []
    for run in await store.open_runs():
        if _ours_to_end(run):
            assert run.pgid is not None
            log.warning("run %d (task #%d): ending its orphaned agent group %d", run.id, run.task_id, run.pgid)
            if not await end_process_group(run.pgid, grace_s):
                log.error("run %d: process group %d did not end; recovering the task anyway", run.id, run.pgid)
        task = await store.get_task(run.task_id)
        reason = f"dispatcher died (worker {run.claimed_by or 'unknown'})"
        outcome = Outcome(OutcomeKind.INTERRUPTED, summary=f"interrupted: {reason}", error=reason)
        retry_at = None
        if task.cancel_requested:
            status = TaskStatus.CANCELED
        elif attempts_left(task):
            status, retry_at = TaskStatus.PENDING, clock.now_ms()
        else:
            status = TaskStatus.FAILED
            outcome = Outcome(OutcomeKind.INTERRUPTED, summary=gave_up(task.attempt_count, reason), error=reason)
        settled = await store.recover(run.id, outcome, status=status, retry_at=retry_at)
        log.warning("task #%d recovered after %s: now %s", settled.id, reason, settled.status)
        recovered.append(settled)
    return recovered
