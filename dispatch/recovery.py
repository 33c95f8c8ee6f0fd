"""Crash recovery: settle the runs that dead dispatchers left open.

Every dispatcher runs this when it takes a lane and then every ``recovery_interval_s``
(a standby one too), so a task that a dead host left is picked up even when no
dispatcher restarts. Several dispatchers may recover at once: ``Store.recover`` is
idempotent and settles a task only while the dead run's worker still holds it.

Which open runs are orphans, by the worker id ``<host>:<pid>:<random>`` they were
claimed under (``dispatch.worker_ids``):

- runs of this machine: when the dispatcher's pid is gone, at once; when it is
  alive, only once the task's lease has expired (a live dispatcher renews it with
  every heartbeat; a live pid with an expired lease is a hung dispatcher or a
  reused pid). So a dispatcher never takes the task of another live dispatcher on
  the same machine;
- runs of another machine (or an id that names no pid): once the lease has expired.
  A remote pid cannot be checked, and the lease is renewed by every heartbeat of a
  live dispatcher, wherever it runs.

For each orphan:

1. on this machine, if the run's agent process group is still alive, end it, but
   only when it is provably the same group: the leader is alive with the recorded
   start time, or the leader is gone while its group lives on (Linux does not hand
   out a pid that is still some group's id, so the group cannot belong to a
   stranger). Another machine's agent cannot be reached from here: it runs on
   until its own timeout, and its result is not recorded (the run is closed);
2. read what the run left (``salvage``, when given: ``dispatch.salvage``): its
   agent session and that session's tokens and cost, from the transcript and the
   CLI's own session file, once its group has ended and written its last;
3. record the run as ``interrupted`` and settle the task as ``vigil.fate`` decides
   for any interrupted attempt: requeued after a backoff with the attempt counted,
   failed when attempts are exhausted, canceled when a person had asked to. A task
   its agent already closed keeps the status it was given.

The attempt is counted so that a task which keeps killing its dispatcher ends up
failed instead of looping forever. Its next attempt resumes the run's session where
one was salvaged (``dispatch.resumption``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from dispatch.process import end_process_group, group_alive, pid_alive, same_process
from dispatch.worker_ids import parse_worker_id
from vigil.clock import Clock
from vigil.errors import TaskNotFound, VigilError
from vigil.fate import Policy
from vigil.models import Outcome, OutcomeKind, Run, Task
from vigil.store import Store

log = logging.getLogger("vigil.dispatch")

GROUP_GRACE_S = 5.0  # SIGTERM → SIGKILL for an orphaned agent group
MIN_INTERVAL_S = 1.0
MAX_INTERVAL_S = 30.0

Salvage = Callable[[Run, Outcome], Awaitable[Outcome]]
"""The interrupted run's outcome with what the run left on disk (``dispatch.salvage``)."""


def recovery_interval_s(lease_ms: int) -> float:
    """How often a dispatcher looks for orphans: a quarter of the lease, 1-30 s, so an
    expired lease is noticed soon after it expires."""
    return min(max(lease_ms / 4000, MIN_INTERVAL_S), MAX_INTERVAL_S)


def orphaned(run: Run, task: Task, now_ms: int) -> str | None:
    """Why ``run`` is an orphan (the reason recorded on it), or None while its
    dispatcher may be alive. See the module docstring."""
    worker_id = run.claimed_by or "unknown"
    worker = parse_worker_id(worker_id)
    lease_expired = task.lease_until is None or task.lease_until <= now_ms
    if worker.local:
        assert worker.pid is not None
        if not pid_alive(worker.pid):
            return f"dispatcher died (worker {worker_id})"
        return f"lease expired (worker {worker_id})" if lease_expired else None
    if lease_expired:
        return f"lease expired: dispatcher presumed dead (worker {worker_id})"
    return None


def _ours_to_end(run: Run) -> bool:
    """Whether the run's process group is alive and provably the one recorded."""
    if run.pgid is None or run.pid is None or not group_alive(run.pgid):
        return False
    if same_process(run.pid, run.proc_start):
        return True
    # Leader gone but its group alive: members of the original group (see above).
    # A live leader with another start time is a reused pid: never signal it.
    return run.pid == run.pgid and not pid_alive(run.pid)


async def recover_orphans(
    store: Store,
    clock: Clock,
    *,
    policy: Policy | None = None,
    grace_s: float = GROUP_GRACE_S,
    salvage: Salvage | None = None,
) -> list[Task]:
    """Settle every orphaned open run as ``policy`` (None: the default settings)
    decides, with what ``salvage`` reads of it (None: nothing: no tokens, no
    session); returns the tasks as recovered. Safe from any process at any time, the
    dispatcher whose runs they are included: its task in flight keeps a fresh lease,
    and a run it abandoned (a database failure while recording it) is settled once
    the lease has expired."""
    recovered = []
    for run in await store.open_runs():
        try:
            task = await store.get_task(run.task_id)
        except TaskNotFound:
            continue  # deleted meanwhile: its runs went with it
        reason = orphaned(run, task, clock.now_ms())
        if reason is None:
            continue
        if parse_worker_id(run.claimed_by or "").local and _ours_to_end(run):
            assert run.pgid is not None
            log.warning("run %d (task #%d): ending its orphaned agent group %d", run.id, run.task_id, run.pgid)
            if not await end_process_group(run.pgid, grace_s):
                log.error("run %d: process group %d did not end; recovering the task anyway", run.id, run.pgid)
        outcome = Outcome(OutcomeKind.INTERRUPTED, summary=f"interrupted: {reason}", error=reason)
        if salvage is not None:
            outcome = await salvage(run, outcome)
        settled = await store.recover(run.id, outcome, policy=policy)
        # The run may have ended by itself between the read above and the recovery
        # (its dispatcher recorded it: the recovery then changes nothing); only a run
        # this recovery recorded is news.
        if (recorded := await store.get_run(run.id)) is None or recorded.error != reason:
            continue
        log.warning("task #%d recovered after %s: now %s", settled.id, reason, settled.status)
        recovered.append(settled)
    return recovered


async def keep_recovering(
    store: Store,
    clock: Clock,
    stop: asyncio.Event,
    *,
    interval_s: float,
    policy: Policy | None = None,
    on_recovered: Callable[[], None] | None = None,
    salvage: Salvage | None = None,
) -> None:
    """Recover orphans every ``interval_s`` until ``stop``, so that a dead host's task
    is picked up once its lease expires even when no dispatcher starts. A failure is
    logged and tried again next time. ``on_recovered`` is called after tasks were
    settled: the dispatcher of this process must look at the queue again, since its
    own connection's commits do not wake it as other processes' do."""
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
        if stop.is_set():
            return
        try:
            recovered = await recover_orphans(store, clock, policy=policy, salvage=salvage)
        except VigilError as err:
            log.warning("crash recovery failed: %s", err)
            continue
        if recovered and on_recovered is not None:
            on_recovered()
