"""`vigil dispatch once` (the real CLI, in a subprocess) and `vigil service install` (in this process)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from tests.daemon.conftest import Markers, RunningVigil, add_sleeper, dispatcher_state, task_json, wait_until

pytestmark = pytest.mark.slow


def test_dispatch_once_with_nothing_due_exits_3(vigil: VigilRunner) -> None:
    vigil("task", "add", "later", "--in", "1h", check=True)

    result = vigil("dispatch", "once")

    assert result.returncode == 3
    assert result.stdout.strip() == "no task is due"


def test_dispatch_once_runs_the_most_urgent_task_and_exits_0(vigil: VigilRunner) -> None:
    vigil("task", "add", "less urgent", "-p", "7", check=True)
    vigil("task", "add", "urgent", "-p", "1", check=True)

    result = vigil("dispatch", "once")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("task #2 completed: dry run")
    assert json.loads(vigil("task", "show", "1", "--json").stdout)["status"] == "pending"
    status = json.loads(vigil("status", "--json").stdout)
    assert status["dispatcher"]["state"] == "stopped"
    assert status["dispatcher"]["alive"] is False


async def test_dispatch_once_says_why_when_the_loop_is_paused(vigil: VigilRunner, home: Path) -> None:
    from vigil.clock import SystemClock
    from vigil.config import load_settings
    from vigil.gate import pause
    from vigil.store import open_store

    vigil("task", "add", "due", check=True)
    store = await open_store(load_settings(home))
    try:
        await pause(store, reason="maintenance", by="human", now_ms=SystemClock().now_ms())
    finally:
        await store.close()

    result = vigil("dispatch", "once")

    assert result.returncode == 3
    assert result.stdout.startswith("not claiming: paused")
    assert "maintenance" in result.stdout
    assert json.loads(vigil("task", "show", "1", "--json").stdout)["status"] == "pending"


def test_dispatch_once_refuses_while_a_dispatcher_runs(
    vigil: VigilRunner,
    start_vigil: Callable[[], RunningVigil],
    markers: Markers,
    configure: Callable[..., None],
) -> None:
    running = start_vigil()
    wait_until("the dispatcher to be idle", lambda: dispatcher_state(vigil) == "idle")

    result = vigil("dispatch", "once")

    assert result.returncode == 1
    assert result.stderr.startswith("vigil: error: a dispatcher is running (pid ")
    assert str(running.proc.pid) in result.stderr
    assert "Traceback" not in result.stderr
    assert running.stop() == 0


def test_dispatch_once_recovers_a_dead_dispatchers_task_first(
    vigil: VigilRunner,
    start_vigil: Callable[[], RunningVigil],
    markers: Markers,
    configure: Callable[..., None],
) -> None:
    running = start_vigil()
    task_id = add_sleeper(vigil, "crashes once", sleep=120, sleep_attempts=1)
    wait_until("the agent to start", markers.starts)
    running.proc.kill()
    running.proc.wait()

    recovering = vigil("dispatch", "once")

    # the task is recovered first, then backs off (retry_backoff 1s): nothing is due yet
    assert recovering.returncode == 3, recovering.stderr
    assert f"task #{task_id} recovered after dispatcher died" in recovering.stderr
    assert task_json(vigil, task_id)["status"] == "pending"
    wait_until("the retry to come due and run", lambda: vigil("dispatch", "once").returncode == 0)
    task = task_json(vigil, task_id)
    assert task["status"] == "completed"
    runs = task["runs"]
    assert isinstance(runs, list)
    assert [r["outcome"] for r in runs] == ["interrupted", "success"]


def test_a_bad_config_is_one_line_and_exit_2(vigil: VigilRunner, home: Path) -> None:
    (home / "vigil.toml").write_text('[dispatch]\nheartbeat = "often"\n')

    for args in (("run",), ("dispatch", "once"), ("status",)):
        result = vigil(*args)
        assert result.returncode == 2, args
        assert result.stderr.count("\n") == 1
        assert "heartbeat" in result.stderr


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "fakehome"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_service_install_print_shows_the_unit_and_writes_nothing(
    vigil_in_process: VigilRunner, home: Path, tmp_path: Path
) -> None:
    result = vigil_in_process("service", "install", "--print", env=env_for(tmp_path), check=True)

    unit = tmp_path / "xdg" / "systemd" / "user" / "vigil.service"
    assert not unit.exists()
    assert f"# {unit} (not written)" in result.stdout
    assert f"ExecStart={sys.executable} -m vigil --home {home} run" in result.stdout
    assert "Restart=always" in result.stdout
    assert f"WorkingDirectory={home}" in result.stdout
    assert (
        vigil_in_process("service", "install", "--dry-run", env=env_for(tmp_path), check=True).stdout == result.stdout
    )


def test_service_install_writes_the_unit_and_says_how_to_enable_it(
    vigil_in_process: VigilRunner, home: Path, tmp_path: Path
) -> None:
    result = vigil_in_process("service", "install", env=env_for(tmp_path), check=True)

    unit = tmp_path / "xdg" / "systemd" / "user" / "vigil.service"
    text = unit.read_text()
    assert result.stdout.startswith(f"wrote: {unit}")
    assert "systemctl --user daemon-reload && systemctl --user enable --now vigil" in result.stdout
    assert "loginctl enable-linger" in result.stdout
    assert "Restart=always" in text
    assert "KillMode=mixed" in text
    assert "TimeoutStopSec=60" in text  # shutdown_grace 30 s + margin
    assert f"--home {home} run" in text
    again = vigil_in_process("service", "install", env=env_for(tmp_path), check=True)
    assert again.stdout.startswith(f"unchanged: {unit}")


def test_service_install_without_xdg_uses_home_config(vigil_in_process: VigilRunner, tmp_path: Path) -> None:
    vigil_in_process("service", "install", env={"HOME": str(tmp_path / "fakehome"), "XDG_CONFIG_HOME": ""}, check=True)

    assert (tmp_path / "fakehome" / ".config" / "systemd" / "user" / "vigil.service").is_file()


def test_service_unit_quotes_a_home_with_spaces(tmp_path: Path) -> None:
    from vigil.config import load_settings
    from vigil.home import init_home
    from vigil.service import unit_text

    home = tmp_path / "my agent"
    init_home(home)

    text = unit_text(load_settings(home.resolve()), python="/usr/bin/python3")

    assert f'ExecStart=/usr/bin/python3 -m vigil --home "{home.resolve()}" run' in text


def test_an_unwritable_log_folder_is_one_line_not_a_traceback(vigil: VigilRunner, home: Path) -> None:
    logs = home / "logs"
    logs.rmdir()
    logs.write_text("a file where the logs folder should be")

    result = vigil("run")

    assert result.returncode == 1
    assert result.stderr.startswith("vigil: error: cannot write the log ")
    assert "Traceback" not in result.stderr
