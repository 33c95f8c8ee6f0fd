"""Crash recovery: settling runs a dead dispatcher left, and ending their agents."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from dispatch.process import group_alive, pid_alive, process_start_time
from dispatch.recovery import recover_orphans
from dispatch.worker_ids import this_host
from vigil.clock import ManualClock
from vigil.config import DispatchSettings
from vigil.fate import Policy
from vigil.models import NewTask, Outcome, OutcomeKind, TaskStatus
from vigil.store.sqlite import SqliteStore

# A dispatcher of this machine whose pid is gone: above Linux's largest possible pid.
GONE_PID = 4_194_304 + 7
DEAD = f"{this_host()}:{GONE_PID}:dead01"

# A leader that starts a child in its own group, then both sleep (an agent and its tool).
AGENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(child.pid, flush=True)
time.sleep(120)
"""


@pytest.fixture
def agent() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """An orphaned "agent": leader in its own session plus one child; yields (leader, child pid)."""
    proc = subprocess.Popen([sys.executable, "-c", AGENT], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    child_pid = int(proc.stdout.readline())
    yield proc, child_pid
    for pid in (proc.pid, child_pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()


async def claimed_by_dead(db: SqliteStore, **fields: object) -> int:
    """Add a task and claim it as the dead worker; returns the run id."""
    await db.add_task(NewTask("t", **fields))  # type: ignore[arg-type]
    claim = await db.claim_next(worker=DEAD, lease_ms=60_000)
    assert claim is not None
    return claim.run_id


def wait_gone(pgid: int) -> bool:
    deadline = time.monotonic() + 10
    while group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def test_recovery_ends_the_orphaned_group_and_requeues_after_a_backoff_with_the_attempt_counted(
    db: SqliteStore, clock: ManualClock, agent: tuple[subprocess.Popen[str], int]
) -> None:
    proc, child_pid = agent
    run_id = await claimed_by_dead(db)
    await db.set_run_process(run_id, pid=proc.pid, pgid=proc.pid, proc_start=process_start_time(proc.pid))

    policy = Policy(DispatchSettings(retry_backoff_ms=10_000))
    (task,) = await recover_orphans(db, clock, policy=policy, grace_s=2)

    assert wait_gone(proc.pid)
    assert proc.wait(timeout=10) is not None
    assert not pid_alive(child_pid)
    assert task.status is TaskStatus.PENDING
    assert task.attempt_count == 1
    # a task that keeps killing its dispatcher must not come straight back
    assert clock.now_ms() + 5_000 <= task.scheduled_for < clock.now_ms() + 10_000
    assert task.claimed_by is None
    (run,) = await db.list_runs(task.id)
    assert run.outcome == "interrupted"
    assert run.error == f"dispatcher died (worker {DEAD})"
    assert await db.open_runs() == []


async def test_a_group_whose_leader_died_is_still_ended(
    db: SqliteStore, clock: ManualClock, agent: tuple[subprocess.Popen[str], int]
) -> None:
    proc, child_pid = agent
    run_id = await claimed_by_dead(db)
    await db.set_run_process(run_id, pid=proc.pid, pgid=proc.pid, proc_start=process_start_time(proc.pid))
    proc.kill()
    proc.wait()
    assert group_alive(proc.pid)  # the child lives on in the group

    await recover_orphans(db, clock, grace_s=2)

    assert wait_gone(proc.pid)
    assert not pid_alive(child_pid)


async def test_a_reused_pid_is_never_signalled(
    db: SqliteStore, clock: ManualClock, agent: tuple[subprocess.Popen[str], int]
) -> None:
    proc, _ = agent
    run_id = await claimed_by_dead(db)
    # the recorded start time differs: the live process with that pid is a stranger
    await db.set_run_process(run_id, pid=proc.pid, pgid=proc.pid, proc_start="1")

    (task,) = await recover_orphans(db, clock, grace_s=2)

    assert proc.poll() is None
    assert group_alive(proc.pid)
    assert task.status is TaskStatus.PENDING


async def test_recovery_fails_a_task_whose_attempts_are_exhausted(db: SqliteStore, clock: ManualClock) -> None:
    await claimed_by_dead(db, max_retries=0)

    (task,) = await recover_orphans(db, clock)

    assert task.status is TaskStatus.FAILED
    assert task.result_summary == f"gave up after 1 attempt: interrupted: dispatcher died (worker {DEAD})"


async def test_recovery_honours_a_cancel_request(db: SqliteStore, clock: ManualClock) -> None:
    run_id = await claimed_by_dead(db)
    runs = await db.open_runs()
    await db.cancel(runs[0].task_id, actor="human")

    (task,) = await recover_orphans(db, clock)

    assert task.status is TaskStatus.CANCELED
    assert [r.id for r in await db.list_runs(task.id)] == [run_id]


async def test_recovery_keeps_what_the_agent_closed(db: SqliteStore, clock: ManualClock) -> None:
    await claimed_by_dead(db)
    runs = await db.open_runs()
    await db.close_task(runs[0].task_id, TaskStatus.COMPLETED, "done before the crash", actor="agent")

    (task,) = await recover_orphans(db, clock)

    assert task.status is TaskStatus.COMPLETED
    assert task.result_summary == "done before the crash"
    assert task.claimed_by is None


async def test_nothing_to_recover(db: SqliteStore, clock: ManualClock) -> None:
    await db.add_task(NewTask("pending"))
    claim = await db.claim_next(worker="w", lease_ms=1000)
    assert claim is not None
    await db.record(claim, Outcome(OutcomeKind.SUCCESS), worker="w")

    assert await recover_orphans(db, clock) == []
