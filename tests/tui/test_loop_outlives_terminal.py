"""A loop started by `vigil tui --with-loop` (`make run`) keeps working when the
TUI goes away without quitting: its terminal closed (tmux's session killed, which
hangs up its pty) or the TUI killed. `vigil status` then tells the truth: the loop
runs, and it still dispatches what is added."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from tests.tui.test_terminal import UNSIZED, started, wait_screen

pytestmark = pytest.mark.slow  # tmux, a real loop and its processes

WAIT_S = 60.0  # safety net only


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def assert_loop_runs_and_dispatches(vigil: VigilRunner, loop_pid: int) -> None:
    wait_until(lambda: vigil("status").stdout.startswith(f"loop: running (pid {loop_pid}"), "status: running")
    status = vigil("status", check=True).stdout
    assert "DIED" not in status
    added = json.loads(vigil("task", "add", "added after the terminal went away", "--json", check=True).stdout)
    task_id = added["id"]

    def completed() -> bool:
        shown = json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)
        return bool(shown["status"] == "completed")

    wait_until(completed, "the loop to run the task added after the TUI went away")
    assert alive(loop_pid)


def stop(loop_pid: int) -> None:
    if alive(loop_pid):
        os.kill(loop_pid, signal.SIGTERM)
        wait_until(lambda: not alive(loop_pid), "the loop to stop on SIGTERM")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_closing_the_terminal_of_make_run_leaves_the_loop_running(
    home: Path, tmp_path: Path, vigil: VigilRunner
) -> None:
    tui = f"env {UNSIZED} TERM=xterm-256color {sys.executable} -m vigil --home {home} tui --with-loop"
    loop_pid = 0
    try:
        with started(tmp_path, "vigil-hangup", 80, 24, tui) as pane:
            screen = wait_screen(pane, lambda s: "(pid " in s and "idle" in s, "the background loop, idle")
            loop_pid = int(screen.split("(pid ")[1].split(")")[0])
            assert alive(loop_pid)
            pane.tmux("kill-session", "-t", pane.name)  # the pty closes: SIGHUP to the terminal's processes
        assert_loop_runs_and_dispatches(vigil, loop_pid)
        assert "stopped" not in (home / "logs" / "loop.out").read_text(errors="replace").lower()
    finally:
        if loop_pid:
            stop(loop_pid)


PARENT = """
import sys, time
from pathlib import Path
from tui.loop_process import BackgroundLoop
loop = BackgroundLoop(Path(sys.argv[1]), Path(sys.argv[1]) / "logs")
print(loop.start(), flush=True)
time.sleep(120)
"""


def test_the_loop_keeps_working_when_the_tui_is_killed(home: Path, vigil: VigilRunner) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(home)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    loop_pid = int(parent.stdout.readline())
    try:
        out = home / "logs" / "loop.out"
        wait_until(lambda: "dispatcher" in out.read_text(errors="replace"), "the loop to log its start")
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert_loop_runs_and_dispatches(vigil, loop_pid)
    finally:
        parent.stdout.close()
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        stop(loop_pid)
