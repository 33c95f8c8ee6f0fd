"""Lanes on SQLite: with lanes = 2, two `vigil run` on this machine run two tasks at
once, never the same task, and a third stands by until a lane is free."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from dispatch.lanes import FileLanes
from tests.conftest import VigilRunner
from tests.daemon.conftest import clean_env, dispatcher_state, pid_alive, status_json, task_json, wait_until
from tests.daemon.lanes_support import Records, start_run, write_lane_home
from vigil.clock import ManualClock

pytestmark = pytest.mark.slow

CONFIG = """\
[dispatch]
executor = "dry-run"
lanes = 2
heartbeat = "500ms"
shutdown_grace = "1s"
"""
TASKS = 6


def test_two_lanes_run_two_tasks_at_once_and_never_the_same_task(
    vigil: VigilRunner, home: Path, tmp_path: Path
) -> None:
    records = Records(tmp_path / "records.txt")
    write_lane_home(home, records.path, CONFIG)
    Path(f"{records.path}.together").touch()  # the first two agents wait for each other
    task_ids = [
        int(json.loads(vigil("task", "add", f"t{n}", "--skills", "lane", "--json", check=True).stdout)["id"])
        for n in range(TASKS)
    ]
    logs = [tmp_path / f"run-{n}.log" for n in range(3)]
    runs: list[subprocess.Popen[bytes]] = []
    try:
        runs.append(start_run(home, logs[0], clean_env()))
        runs.append(start_run(home, logs[1], clean_env()))
        done = lambda: all(task_json(vigil, t)["status"] == "completed" for t in task_ids)  # noqa: E731
        wait_until("every task to complete", done)
        runs.append(start_run(home, logs[2], clean_env()))
        wait_until("the third to stand by", lambda: "standing by" in logs[2].read_text())

        # each task ran exactly once, by one of the two lane holders
        assert sorted(e.task_id for e in records.starts()) == sorted(task_ids)
        assert sorted(e.task_id for e in records.ends()) == sorted(task_ids)
        for task_id in task_ids:
            task_runs = task_json(vigil, task_id)["runs"]
            assert isinstance(task_runs, list)
            (task_run,) = task_runs
            assert task_run["outcome"] == "success"
        # the together-barrier needed both dispatchers
        assert {e.dispatcher_pid for e in records.starts()} == {runs[0].pid, runs[1].pid}
        assert records.max_overlap() == 2

        runs[0].send_signal(signal.SIGTERM)
        assert runs[0].wait(timeout=30) == 0
        wait_until("the third to take the freed lane", lambda: "took over dispatcher lane" in logs[2].read_text())
        # One dispatcher stopped, the loop did not: the shared heartbeat never says "stopped".
        assert "the loop goes on without this one" in logs[0].read_text()
        assert dispatcher_state(vigil) in ("idle", "running")

        for run in runs[1:]:  # both at once: the last to let go of its lane says so
            run.send_signal(signal.SIGTERM)
        assert [run.wait(timeout=30) for run in runs[1:]] == [0, 0]
        dispatcher = status_json(vigil)["dispatcher"]
        assert isinstance(dispatcher, dict)
        assert dispatcher["state"] == "stopped"
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
            run.wait()


async def test_dispatch_once_takes_a_free_lane_and_refuses_when_every_lane_is_held(
    vigil: VigilRunner, home: Path, tmp_path: Path
) -> None:
    records = Records(tmp_path / "records.txt")
    write_lane_home(home, records.path, CONFIG)
    database = home / "data" / "vigil.db"
    vigil("task", "add", "one", "--skills", "lane", check=True)
    vigil("task", "add", "two", "--skills", "lane", check=True)
    held = FileLanes(database, 2, ManualClock())
    other = FileLanes(database, 2, ManualClock())
    try:
        assert await held.try_acquire()  # a `vigil run` holding lane 0, say

        ran = vigil("dispatch", "once")
        assert ran.returncode == 0, ran.stderr
        assert len(records.ends()) == 1

        assert await other.try_acquire()  # and another holding lane 1
        refused = vigil("dispatch", "once")
        assert refused.returncode == 1
        (line,) = refused.stderr.splitlines()
        assert line.startswith("vigil: error: every dispatcher lane is taken (pid ")
        assert line.count(f"pid {os.getpid()}") == 2
        assert len(records.ends()) == 1
    finally:
        await held.release()
        await other.release()


def test_a_killed_dispatchers_task_is_recovered_by_its_sibling_on_the_same_machine_at_once(
    vigil: VigilRunner, home: Path, tmp_path: Path
) -> None:
    # A long lease: a recovery by lease would say "lease expired"; this one must
    # come from the pid check, as soon as the sibling's periodic recovery runs.
    records = Records(tmp_path / "records.txt")
    write_lane_home(home, records.path, CONFIG + 'lease = "8s"\n')
    task_id = int(json.loads(vigil("task", "add", "slow", "--skills", "lane", "--json", check=True).stdout)["id"])
    sentinel = Path(f"{records.path}.slow.{task_id}")
    sentinel.touch()
    logs = [tmp_path / f"run-{n}.log" for n in range(2)]
    runs = [start_run(home, log, clean_env()) for log in logs]
    try:
        wait_until("the slow task to start", records.starts)
        (first,) = records.starts()
        victim = next(run for run in runs if run.pid == first.dispatcher_pid)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        assert pid_alive(first.pid)  # its agent lives on, in a session of its own

        wait_until("the sibling to end the orphaned agent", lambda: not pid_alive(first.pid))
        sentinel.unlink()
        wait_until("the task to run again and complete", lambda: task_json(vigil, task_id)["status"] == "completed")

        task_runs = task_json(vigil, task_id)["runs"]
        assert isinstance(task_runs, list)
        interrupted, rerun = task_runs
        assert interrupted["outcome"] == "interrupted"
        assert interrupted["error"].startswith(f"dispatcher died (worker {socket.gethostname()}:{victim.pid}:")
        assert rerun["outcome"] == "success"
        (survivor,) = [run for run in runs if run is not victim]
        assert [e.dispatcher_pid for e in records.starts()] == [victim.pid, survivor.pid]
        assert [e.run_id for e in records.ends()] == [rerun["id"]]
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
            run.wait()
