"""`vigil run` as a real process: wake-ups, graceful stop, crash recovery, one
dispatcher per home. Agents are tests/daemon/agent.py run by the command executor."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from tests.daemon.conftest import (
    Markers,
    RunningVigil,
    add_sleeper,
    dispatcher_state,
    pid_alive,
    task_json,
    wait_until,
)

pytestmark = pytest.mark.slow


def test_a_task_added_while_idle_starts_without_waiting_for_a_sensor(
    vigil: VigilRunner,
    home: Path,
    start_vigil: Callable[[], RunningVigil],
    markers: Markers,
    configure: Callable[..., None],
) -> None:
    running = start_vigil()
    wait_until("the dispatcher to be idle", lambda: dispatcher_state(vigil) == "idle")

    task_id = add_sleeper(vigil, "quick one")

    wait_until("the task to complete", lambda: task_json(vigil, task_id)["status"] == "completed", timeout_s=10)
    assert running.stop() == 0
    assert [s["task"] for s in markers.starts()] == [task_id]
    log_file = (home / "logs" / "vigil.log").read_text()
    assert f"task #{task_id} started (attempt 1): quick one" in log_file
    assert f"task #{task_id} completed (success)" in log_file


def test_sigterm_during_a_task_stops_gracefully_and_leaves_no_orphan(
    vigil: VigilRunner, start_vigil: Callable[[], RunningVigil], markers: Markers, configure: Callable[..., None]
) -> None:
    configure(grace="1s")
    running = start_vigil()
    task_id = add_sleeper(vigil, "slow one", sleep=120)
    wait_until("the agent to start", markers.starts)
    (agent,) = markers.starts()

    assert running.stop(signal.SIGTERM) == 0

    assert not pid_alive(agent["pid"])
    assert not pid_alive(agent["child"])
    task = task_json(vigil, task_id)
    assert task["status"] == "pending"
    assert task["attempt_count"] == 0  # an operator's stop is not the task's failure
    assert task["claimed_by"] is None
    runs = task["runs"]
    assert isinstance(runs, list)
    assert [(r["attempt"], r["outcome"]) for r in runs] == [(1, "stopped")]
    assert "stopping" in running.log()
    assert dispatcher_state(vigil) is None  # the heartbeat says stopped


def test_sigterm_lets_a_task_finish_within_the_grace(
    vigil: VigilRunner, start_vigil: Callable[[], RunningVigil], markers: Markers, configure: Callable[..., None]
) -> None:
    configure(grace="60s")
    running = start_vigil()
    task_id = add_sleeper(vigil, "nearly done", sleep=1)
    wait_until("the agent to start", markers.starts)

    assert running.stop(signal.SIGTERM) == 0

    assert task_json(vigil, task_id)["status"] == "completed"
    assert len(markers.ends()) == 1


def test_kill_9_then_restart_recovers_the_task_and_ends_the_old_agent(
    vigil: VigilRunner, start_vigil: Callable[[], RunningVigil], markers: Markers, configure: Callable[..., None]
) -> None:
    first = start_vigil()
    task_id = add_sleeper(vigil, "interrupted by a crash", sleep=120, sleep_attempts=1)
    wait_until("the agent to start", markers.starts)
    (old,) = markers.starts()

    first.proc.kill()
    first.proc.wait()
    assert pid_alive(old["pid"])  # the agent outlived its dispatcher (own session)

    second = start_vigil()
    wait_until("the task to complete", lambda: task_json(vigil, task_id)["status"] == "completed")

    assert not pid_alive(old["pid"])
    assert not pid_alive(old["child"])
    starts = markers.starts()
    assert [(s["task"], s["attempt"]) for s in starts] == [(task_id, 1), (task_id, 2)]
    assert markers.ends() == [(task_id, 2)]  # completed exactly once more
    assert starts[1]["ppid"] == second.proc.pid
    task = task_json(vigil, task_id)
    runs = task["runs"]
    assert isinstance(runs, list)
    assert [(r["attempt"], r["outcome"]) for r in runs] == [(1, "interrupted"), (2, "success")]
    assert "dispatcher died" in str(runs[0]["error"])
    assert task["attempt_count"] == 2
    assert markers.overlaps() == []
    assert second.stop() == 0


def test_a_second_run_stands_by_and_takes_over_when_the_first_dies(
    vigil: VigilRunner, start_vigil: Callable[[], RunningVigil], markers: Markers, configure: Callable[..., None]
) -> None:
    first = start_vigil()
    wait_until("the first dispatcher to be idle", lambda: dispatcher_state(vigil) == "idle")
    second = start_vigil()
    wait_until("the second to stand by", lambda: "standing by" in second.log())
    assert f"pid {first.proc.pid}" in second.log()

    ids = [add_sleeper(vigil, f"task {n}", sleep=1.5, sleep_attempts=1) for n in range(3)]
    wait_until("two agents to have started", lambda: len(markers.starts()) >= 2)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()

    wait_until("every task to complete", lambda: all(task_json(vigil, i)["status"] == "completed" for i in ids))

    starts = markers.starts()
    assert markers.overlaps() == []  # at no moment did two agents run
    parents = [s["ppid"] for s in starts]
    # the first dispatcher ran the first ones, the second everything after the take-over
    assert parents[0] == first.proc.pid
    switch = parents.index(second.proc.pid)
    assert set(parents[:switch]) == {first.proc.pid}
    assert set(parents[switch:]) == {second.proc.pid}
    assert "took over" in second.log()
    assert second.stop() == 0


def test_a_second_run_exits_cleanly_from_standby(
    vigil: VigilRunner, start_vigil: Callable[[], RunningVigil], configure: Callable[..., None]
) -> None:
    first = start_vigil()
    wait_until("the first dispatcher to be idle", lambda: dispatcher_state(vigil) == "idle")
    second = start_vigil()
    wait_until("the second to stand by", lambda: "standing by" in second.log())

    assert second.stop(signal.SIGINT) == 0
    assert first.proc.poll() is None
    assert first.stop(signal.SIGINT) == 0


SENSOR = """
[[sensors]]
use = "schedule"
name = "tick"
every = "1h"
subject = "tick {date} {time}"
"""


def test_standby_runs_its_sensors_only_when_configured(
    vigil: VigilRunner, home: Path, start_vigil: Callable[[], RunningVigil], configure: Callable[..., None]
) -> None:
    config = home / "vigil.toml"
    config.write_text(config.read_text() + SENSOR)
    first = start_vigil()
    wait_until("the first dispatcher to be idle", lambda: dispatcher_state(vigil) == "idle")
    quiet = start_vigil()
    wait_until("the second to stand by", lambda: "standing by" in quiet.log())
    assert quiet.stop() == 0
    assert "sensor(s) started" not in quiet.log()

    config.write_text(config.read_text().replace("[dispatch]\n", "[dispatch]\nstandby_sensors = true\n"))
    busy = start_vigil()
    wait_until("the standby's sensors to start", lambda: "sensor(s) started" in busy.log())
    assert "standing by" in busy.log()
    assert busy.stop() == 0
    assert first.stop() == 0


def test_a_second_sigterm_skips_the_rest_of_the_grace(
    vigil: VigilRunner, start_vigil: Callable[[], RunningVigil], markers: Markers, configure: Callable[..., None]
) -> None:
    configure(grace="1h")
    running = start_vigil()
    task_id = add_sleeper(vigil, "slow one", sleep=120)
    wait_until("the agent to start", markers.starts)
    (agent,) = markers.starts()

    running.proc.send_signal(signal.SIGTERM)
    wait_until("the grace period to begin", lambda: "gets 3600s to finish" in running.log())
    assert running.proc.poll() is None
    assert running.stop(signal.SIGTERM) == 0

    assert not pid_alive(agent["pid"])
    assert not pid_alive(agent["child"])
    task = task_json(vigil, task_id)
    assert (task["status"], task["attempt_count"]) == ("pending", 0)
