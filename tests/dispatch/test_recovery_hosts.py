"""Crash recovery with several dispatchers: live ones on this machine are left alone,
other machines' runs are recovered only after their lease, and worker ids parse."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.process import group_alive, process_start_time
from dispatch.recovery import recover_orphans, recovery_interval_s
from dispatch.worker_ids import HOST_ENV, new_worker_id, parse_worker_id, this_host
from vigil.clock import ManualClock
from vigil.models import Claim, NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store.sqlite import SqliteStore

LEASE_MS = 60_000


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process in its own group, standing in for an agent."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    yield proc
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


async def claim_as(db: SqliteStore, worker: str) -> int:
    """Add a task and claim it as ``worker``; returns the task id."""
    added = await db.add_task(NewTask(f"task of {worker}"))
    claim = await db.claim_next(worker=worker, lease_ms=LEASE_MS)
    assert claim is not None
    assert claim.task.id == added.task_id
    return claim.task.id


async def test_a_live_dispatcher_of_this_machine_keeps_its_task(db: SqliteStore, clock: ManualClock) -> None:
    # Another dispatcher process of this machine: this test process is alive, so its
    # pid stands in for a live sibling dispatcher holding another lane.
    sibling = f"{this_host()}:{os.getpid()}:sib001"
    task_id = await claim_as(db, sibling)

    assert await recover_orphans(db, clock) == []
    assert (await db.get_task(task_id)).status is TaskStatus.ACTIVE

    clock.advance(LEASE_MS + 1)  # it stopped renewing: hung, or the pid was reused
    (task,) = await recover_orphans(db, clock)
    assert task.id == task_id
    assert task.status is TaskStatus.PENDING
    (run,) = await db.list_runs(task_id)
    assert run.error == f"lease expired (worker {sibling})"


async def test_the_callers_own_run_is_recovered_only_once_abandoned(db: SqliteStore, clock: ManualClock) -> None:
    me = new_worker_id()  # this process's own dispatcher
    task_id = await claim_as(db, me)
    await db.renew_lease(task_id, worker=me, lease_until=clock.now_ms() + 2 * LEASE_MS)  # its heartbeat
    clock.advance(LEASE_MS + 1)

    assert await recover_orphans(db, clock) == []  # in flight: the lease is fresh
    assert (await db.get_task(task_id)).status is TaskStatus.ACTIVE

    clock.advance(LEASE_MS)  # no heartbeat since: the run was abandoned
    (task,) = await recover_orphans(db, clock)
    assert task.status is TaskStatus.PENDING
    (run,) = await db.list_runs(task_id)
    assert run.error == f"lease expired (worker {me})"


async def test_another_hosts_run_waits_for_its_lease_and_its_group_is_never_signalled(
    db: SqliteStore, clock: ManualClock, sleeper: subprocess.Popen[bytes]
) -> None:
    remote = "far-away-host:4242:abc123"
    task_id = await claim_as(db, remote)
    (open_run,) = await db.open_runs()
    # Pids recorded by another machine mean nothing here, even when they match a live
    # process of this one exactly.
    await db.set_run_process(open_run.id, pid=sleeper.pid, pgid=sleeper.pid, proc_start=process_start_time(sleeper.pid))

    clock.advance(LEASE_MS - 1)
    assert await recover_orphans(db, clock) == []
    assert (await db.get_task(task_id)).status is TaskStatus.ACTIVE

    await db.renew_lease(task_id, worker=remote, lease_until=clock.now_ms() + LEASE_MS)
    clock.advance(LEASE_MS - 1)  # the heartbeat kept it alive past the first lease
    assert await recover_orphans(db, clock) == []

    clock.advance(2)
    (task,) = await recover_orphans(db, clock, grace_s=1)
    assert task.status is TaskStatus.PENDING
    assert task.attempt_count == 1
    (run,) = await db.list_runs(task_id)
    assert run.outcome == "interrupted"
    assert run.error == f"lease expired: dispatcher presumed dead (worker {remote})"
    assert sleeper.poll() is None
    assert group_alive(sleeper.pid)


async def test_a_worker_id_without_a_pid_counts_as_remote(db: SqliteStore, clock: ManualClock) -> None:
    task_id = await claim_as(db, "w")
    assert await recover_orphans(db, clock) == []
    clock.advance(LEASE_MS)
    (task,) = await recover_orphans(db, clock)
    assert task.id == task_id
    assert task.status is TaskStatus.PENDING


async def test_recovering_twice_settles_a_run_once(db: SqliteStore, clock: ManualClock) -> None:
    task_id = await claim_as(db, "gone-host:1:abc")
    clock.advance(LEASE_MS)

    await recover_orphans(db, clock)
    await recover_orphans(db, clock)  # another dispatcher, a moment later

    task = await db.get_task(task_id)
    assert task.status is TaskStatus.PENDING
    assert task.attempt_count == 1
    assert len(await db.list_runs(task_id)) == 1


def test_worker_ids_parse_into_host_and_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HOST_ENV, raising=False)
    worker = parse_worker_id(new_worker_id())
    assert (worker.host, worker.pid, worker.local) == (this_host(), os.getpid(), True)

    ipv6 = parse_worker_id("fe80::1:123:abcdef")
    assert (ipv6.host, ipv6.pid, ipv6.local) == ("fe80::1", 123, False)

    for odd in ("w", "host:notapid:abc", ""):
        assert parse_worker_id(odd).pid is None
        assert not parse_worker_id(odd).local


def test_vigil_host_names_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOST_ENV, "builder-7")
    assert this_host() == "builder-7"
    assert new_worker_id().startswith(f"builder-7:{os.getpid()}:")
    assert not parse_worker_id(f"other:{os.getpid()}:abc").local


def test_recovery_runs_a_few_times_per_lease() -> None:
    assert recovery_interval_s(120_000) == 30.0
    assert recovery_interval_s(20_000) == 5.0
    assert recovery_interval_s(1_000) == 1.0


class FinishesMeanwhile(SqliteStore):
    """The real store, whose run ends by itself (its dispatcher records it) just
    after recovery read the open runs: the interleaving the fault hunt caught."""

    finish: tuple[Claim, str] | None = None

    async def get_task(self, task_id: int) -> Task:
        if self.finish is not None:
            claim, worker = self.finish
            self.finish = None
            await self.record(claim, Outcome(OutcomeKind.SUCCESS, summary="done"), worker=worker)
        return await super().get_task(task_id)


async def test_a_run_that_ended_normally_meanwhile_is_not_reported_recovered(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = await FinishesMeanwhile.open(tmp_path / "vigil.db", clock=clock)
    assert isinstance(store, FinishesMeanwhile)
    try:
        sibling = f"{this_host()}:{os.getpid()}:sib001"
        await store.add_task(NewTask("ends by itself"))
        claim = await store.claim_next(worker=sibling, lease_ms=LEASE_MS)
        assert claim is not None
        clock.advance(LEASE_MS + 1)  # its lease looks expired to the recovery
        store.finish = (claim, sibling)
        with caplog.at_level(logging.WARNING, logger="vigil.dispatch"):
            assert await recover_orphans(store, clock) == []
        task = await store.get_task(claim.task.id)
    finally:
        await store.close()
    assert task.status is TaskStatus.COMPLETED
    assert "recovered after" not in caplog.text
