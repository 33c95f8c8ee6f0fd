"""Lanes on PostgreSQL, as the scale-out issue asks: 8 `vigil run` processes "on
separate hosts" share one database with lanes = 4 and drain the queue. Each task
runs exactly once, never more than 4 at a time, and the task of a dispatcher killed
mid-task is recovered by another once its lease has expired.

The hosts are faked with ``VIGIL_HOST`` (the host part of the worker id): all the
processes run on this machine, but each believes the others are remote, so the
killed one's task can only be recovered through its lease, as on real separate
hosts. The killed host's agent is killed with it (a dead host runs nothing).

``VIGIL_LANES_TASKS`` sets the size (default 2,000, the issue's figure).
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from tests.daemon.conftest import clean_env
from tests.daemon.lanes_support import Event, Records, start_run, write_lane_home
from vigil.models import NewTask, TaskStatus
from vigil.store.postgres import PostgresStore

TASKS = int(os.environ.get("VIGIL_LANES_TASKS", "2000"))
DISPATCHERS = 8
LANES = 4
SAFETY_S = 240.0  # bounds every wait; only stops a broken test from hanging

CONFIG = """\
[store]
url = "{url}"

[dispatch]
executor = "dry-run"
lanes = {lanes}
lease = "5s"  # short, so the killed host's task comes back soon; 10 heartbeats
heartbeat = "500ms"
shutdown_grace = "1s"
max_retries = 3
"""

pytestmark = pytest.mark.slow
T = TypeVar("T")


async def wait_for(what: str, check: Callable[[], Awaitable[T]], timeout_s: float = SAFETY_S) -> T:
    """Poll ``check`` until it returns something truthy; fail after the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


@pytest.mark.timeout(SAFETY_S + 120)  # about 40 s here; a slower machine must not fail it on time alone
async def test_eight_dispatchers_on_four_lanes_drain_the_queue_once_each(
    postgres_migrated_url: str, home: Path, tmp_path: Path
) -> None:
    records = Records(tmp_path / "records.txt")
    write_lane_home(home, records.path, CONFIG.format(url=postgres_migrated_url, lanes=LANES))
    store = await PostgresStore.open(postgres_migrated_url)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        # The most urgent task is claimed first and hangs until the test lets it go.
        slow = await store.add_task(NewTask("slow", priority=1, skills=("lane",)))
        assert slow.task_id is not None
        slow_id = slow.task_id
        Path(f"{records.path}.slow.{slow_id}").touch()
        batch = [NewTask(f"t{n}", skills=("lane",)) for n in range(TASKS - 1)]
        assert (await store.add_tasks(batch, actor="human")).created == TASKS - 1

        for n in range(DISPATCHERS):
            env = clean_env() | {"VIGIL_HOST": f"host-{n}"}
            processes.append(start_run(home, tmp_path / f"run-{n}.log", env))
        by_pid = {proc.pid: proc for proc in processes}

        async def slow_started() -> list[Event]:
            return [e for e in records.starts() if e.task_id == slow_id]

        (first,) = await wait_for("the slow task to start", slow_started)
        victim = by_pid[first.dispatcher_pid]
        victim.send_signal(signal.SIGKILL)
        os.kill(first.pid, signal.SIGKILL)  # its host is gone: its agent too
        killed_at_ns = time.time_ns()
        victim.wait(timeout=30)
        Path(f"{records.path}.slow.{slow_id}").unlink()

        async def drained() -> bool:
            counts = await store.count_by_status()
            return counts[TaskStatus.COMPLETED] == TASKS

        await wait_for(f"{TASKS} tasks to complete", drained)
        counts = await store.count_by_status()
        assert {s: n for s, n in counts.items() if n} == {TaskStatus.COMPLETED: TASKS}

        # Exactly one successful run per task, no task claimed twice: every task has
        # one run, but the slow one, whose first run the dead host left open.
        runs_per_task = {}
        for task in await store.list_tasks(limit=TASKS + 10):
            runs = await store.list_runs(task.id)
            runs_per_task[task.id] = runs
            assert [r.outcome for r in runs if r.outcome == "success"] == ["success"], task.id
        assert len(runs_per_task) == TASKS
        assert all(len(runs) == 1 for task_id, runs in runs_per_task.items() if task_id != slow_id)
        interrupted, rerun = runs_per_task[slow_id]
        assert interrupted.outcome == "interrupted"
        assert interrupted.claimed_by is not None
        assert interrupted.claimed_by.split(":")[1] == str(victim.pid)
        assert interrupted.error == f"lease expired: dispatcher presumed dead (worker {interrupted.claimed_by})"
        assert rerun.claimed_by is not None
        assert rerun.claimed_by.split(":")[0] != interrupted.claimed_by.split(":")[0]

        # What the agents recorded agrees: one start and one end per task, two starts
        # for the slow one (its first agent died with its host).
        starts = collections.Counter(e.task_id for e in records.starts())
        ends = collections.Counter(e.task_id for e in records.ends())
        assert set(starts) == set(runs_per_task)
        assert starts[slow_id] == 2
        assert all(n == 1 for task_id, n in starts.items() if task_id != slow_id)
        assert all(n == 1 for n in ends.values())
        assert set(ends) == set(runs_per_task)

        # Never more than LANES at once (the killed agent counted until its kill);
        # and the lanes were used: tasks did run side by side.
        peak = records.max_overlap(cut_short={first.run_id: killed_at_ns})
        assert 1 < peak <= LANES
        # Every dispatcher still alive took part or stood by; none ran a task outside a lane.
        assert {e.dispatcher_pid for e in records.starts()} <= set(by_pid)
    finally:
        await store.close()
        for proc in processes:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in processes:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def terminate_lane_sessions(url: str) -> int:
    """End the lane sessions of this database's dispatchers; returns how many."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name LIKE 'vigil dispatcher %'"
        ).fetchall()
    return len(rows)


async def test_a_lost_lane_ends_the_running_task_and_the_dispatcher_takes_a_lane_again(
    postgres_migrated_url: str, home: Path, tmp_path: Path
) -> None:
    records = Records(tmp_path / "records.txt")
    write_lane_home(home, records.path, CONFIG.format(url=postgres_migrated_url, lanes=1))
    store = await PostgresStore.open(postgres_migrated_url)
    log_path = tmp_path / "run.log"
    proc = start_run(home, log_path, clean_env())
    try:
        added = await store.add_task(NewTask("held up", skills=("lane",)))
        assert added.task_id is not None
        task_id = added.task_id
        Path(f"{records.path}.slow.{task_id}").touch()

        async def started() -> list[Event]:
            return records.starts()

        (first,) = await wait_for("the agent to start", started, timeout_s=60)

        assert terminate_lane_sessions(postgres_migrated_url) == 1

        async def lost() -> bool:
            return "lost dispatcher lane" in log_path.read_text()

        await wait_for("the dispatcher to notice", lost, timeout_s=60)

        async def ended() -> bool:
            # recorded once the executor has ended the agent's process group
            return any(run.outcome == "stopped" for run in await store.list_runs(task_id))

        await wait_for("the running task to be ended", ended, timeout_s=60)
        Path(f"{records.path}.slow.{task_id}").unlink()

        async def completed() -> bool:
            return (await store.get_task(task_id)).status is TaskStatus.COMPLETED

        await wait_for("the task to run again and complete", completed, timeout_s=60)
        task = await store.get_task(task_id)
        assert task.attempt_count == 1  # the lost lane was not the task's fault
        stopped, rerun = await store.list_runs(task_id)
        assert stopped.outcome == "stopped"
        assert rerun.outcome == "success"
        assert first.pid not in {e.pid for e in records.ends()}  # the first agent was ended, not finished
        log = log_path.read_text()
        assert f"task #{task_id} pending (stopped): stopped: the dispatcher lost its lane" in log
        assert log.count("(executor dry-run, lane 0 of 1)") == 2  # took its lane again
    finally:
        await store.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
