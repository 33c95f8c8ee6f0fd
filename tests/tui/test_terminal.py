"""`vigil tui` in a real terminal (tmux): a task added with the CLI shows up, `+`
raises its priority in the database, ctrl+q, ctrl+c and q quit and say what happens
to the loop; at 80x24 on 10,000 tasks the header names the home and the footer
keeps whole words."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from tests.tui.crowd import crowd
from vigil.config import load_settings

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"), pytest.mark.slow]
WAIT_S = 30.0  # safety net only
# A tmux server passes its own environment to new windows; COLUMNS and LINES there
# (from whoever started the server) would override the window's size for the TUI.
UNSIZED = "-u COLUMNS -u LINES"


@dataclass(frozen=True)
class Pane:
    """The one pane of a tmux server of its own (its socket in the test's folder).
    Tests never share a server: a server exits when its last session is killed,
    and a test starting a session on a shared one could reach it while it is
    still shutting down."""

    socket: Path
    name: str

    def tmux(self, *args: str) -> str:
        proc = subprocess.run(["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"tmux {args[0]} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)


@contextmanager
def started(folder: Path, name: str, width: int, height: int, command: str) -> Iterator[Pane]:
    pane = Pane(folder / "tmux.sock", name)
    pane.tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), command)
    try:
        yield pane
    finally:
        subprocess.run(["tmux", "-S", str(pane.socket), "kill-server"], capture_output=True, check=False)


@pytest.fixture
def session(home: Path, tmp_path: Path) -> Iterator[Pane]:
    env = " ".join(f"{k}={v}" for k, v in {"TERM": "xterm-256color", "PYTHONUNBUFFERED": "1"}.items())
    done = tmp_path / "tui.exit"
    # The shell stays a minute after the TUI exits so its last words can be read.
    command = f"env {UNSIZED} {env} {sys.executable} -m vigil --home {home} tui; echo exit=$? > {done}; sleep 60"
    with started(tmp_path, "vigil-test", 100, 30, command) as pane:
        yield pane


def wait_screen(pane: Pane, condition: Callable[[str], bool], what: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while True:
        screen = pane.screen()
        if condition(screen):
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; screen:\n{screen}")
        time.sleep(0.1)


def test_tui_in_tmux_shows_cli_task_and_plus_raises_it(
    session: Pane, vigil: VigilRunner, home: Path, tmp_path: Path
) -> None:
    wait_screen(session, lambda s: "not started" in s, "the dashboard")
    added = vigil("task", "add", "seen in a real terminal", "--json", check=True)
    task_id = json.loads(added.stdout)["id"]
    wait_screen(session, lambda s: "seen in a real terminal" in s, "the new task on screen")
    session.keys("+")
    deadline = time.monotonic() + WAIT_S
    while json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)["priority"] != 4:
        assert time.monotonic() < deadline, "priority never changed"
        time.sleep(0.1)
    wait_screen(session, lambda s: "priority 5 → 4" in s, "the confirmation")
    session.keys("C-q")
    wait_screen(session, lambda s: "keeps running" in s, "the quit message")
    exit_file = tmp_path / "tui.exit"
    deadline = time.monotonic() + WAIT_S
    while not exit_file.exists():
        assert time.monotonic() < deadline, "the TUI did not exit"
        time.sleep(0.1)
    assert exit_file.read_text().strip() == "exit=0"


@pytest.fixture
def loop_session(home: Path, tmp_path: Path) -> Iterator[Pane]:
    done = tmp_path / "tui.exit"
    tui = f"env {UNSIZED} TERM=xterm-256color {sys.executable} -m vigil --home {home} tui --with-loop"
    command = f"{tui}; echo exit=$? > {done}; sleep 60"
    with started(tmp_path, "vigil-loop", 80, 24, command) as pane:
        yield pane


def test_with_loop_runs_the_loop_in_the_background_and_stops_it_on_quit(
    loop_session: Pane, vigil: VigilRunner, home: Path
) -> None:
    """`make run`'s command at 80x24: the loop runs tasks while the TUI shows them."""
    screen = wait_screen(loop_session, lambda s: "background process (pid" in s, "the loop's pid")
    pid = int(screen.split("background process (pid ")[1].split(")")[0])
    vigil("task", "add", "handled by the background loop", check=True)
    wait_screen(loop_session, lambda s: "Completed 1" in s, "the task completed by the loop")
    loop_session.keys("C-c")  # ctrl+c quits as ctrl+q does, with the same question
    wait_screen(loop_session, lambda s: f"pid {pid}) will be stopped" in s, "the quit question")
    loop_session.keys("Enter")  # Enter confirms, as in every dialog
    wait_screen(loop_session, lambda s: f"stopped the background loop (pid {pid}) with SIGTERM" in s, "the report")
    assert "dispatcher" in (home / "logs" / "loop.out").read_text()


def test_the_palette_runs_a_vigil_action_in_a_real_terminal(
    session: Pane, vigil: VigilRunner, home: Path, tmp_path: Path
) -> None:
    """ctrl+p, type "defer", enter: the palette opens the defer dialog on the
    highlighted task; enter takes the focused preset (1 hour)."""
    added = vigil("task", "add", "put off by the palette", "--json", check=True)
    task_id = json.loads(added.stdout)["id"]
    wait_screen(session, lambda s: "put off by the palette" in s, "the task on screen")
    session.keys("C-p")
    wait_screen(session, lambda s: "Quit (^q)" in s or "Search for commands" in s, "the palette")
    session.keys("-l", "defer")
    wait_screen(session, lambda s: "Defer (d)" in s, "the defer action, with its key")
    session.keys("Enter")
    wait_screen(session, lambda s: f"Defer #{task_id}" in s, "the defer dialog")
    session.keys("Enter")
    wait_screen(session, lambda s: f"#{task_id} deferred by 1 hour: due" in s, "the confirmation")
    shown = json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)
    later = datetime.fromisoformat(shown["scheduled_for"]) - datetime.fromisoformat(shown["created_at"])
    assert later >= timedelta(minutes=59)  # the preset: an hour after it was due (now)
    session.keys("C-q")
    wait_screen(session, lambda s: "it started no loop" in s, "the quit message, which claims no loop")


@pytest.fixture
def crowded_session(home: Path, tmp_path: Path) -> Iterator[Pane]:
    """The dashboard at 80x24 on a home of 10,000 tasks (built by SQL)."""
    asyncio.run(crowd(load_settings(home).store.path, total=10_000, due_at_ms=int(time.time() * 1000) - 60_000))
    done = tmp_path / "tui.exit"
    tui = f"env {UNSIZED} TERM=xterm-256color {sys.executable} -m vigil --home {home} tui"
    with started(tmp_path, "vigil-narrow", 80, 24, f"{tui}; echo exit=$? > {done}; sleep 60") as pane:
        yield pane


def test_at_80x24_the_header_names_the_home_and_the_footer_keeps_whole_words(
    crowded_session: Pane, home: Path, tmp_path: Path
) -> None:
    pane = crowded_session
    screen = wait_screen(pane, lambda s: "rows 1–100 of 10,000" in s, "the first window of 10,000 tasks")
    screen = wait_screen(pane, lambda s: "- Lower" in s.splitlines()[-1], "the footer of the highlighted row")
    lines = screen.splitlines()
    assert lines[0].rstrip().endswith("/home")  # the home it watches, cut at the front if long
    title = pane.tmux("display-message", "-p", "-t", pane.name, "#{pane_title}").strip()
    assert title == f"vigil — {home}"
    assert lines[1].startswith(" ○ not started")
    assert "Pending 9,700" in lines[2]
    assert "Approval 200" in lines[2]
    # the highlighted row has priority 1 and waits for nothing: Raise and Approve do not apply to it
    assert lines[-1].rstrip() == " n New  - Lower  d Defer  x Cancel  spc Mark  / Filter  q Quit  ? Help"
    pane.keys("Space")
    screen = wait_screen(pane, lambda s: "1 marked" in s, "the marked badge")
    assert screen.splitlines()[1].startswith(" ○ not started")  # beside the loop line, not over it
    assert screen.splitlines()[1].rstrip().endswith("1 marked  (esc clears)")
    pane.keys("q")
    wait_screen(pane, lambda s: "it started no loop" in s, "q quits")
    exit_file = tmp_path / "tui.exit"
    deadline = time.monotonic() + WAIT_S
    while not exit_file.exists():
        assert time.monotonic() < deadline, "the TUI did not exit"
        time.sleep(0.1)
    assert exit_file.read_text().strip() == "exit=0"


def test_a_background_loop_on_standby_says_so(home: Path, tmp_path: Path, vigil: VigilRunner) -> None:
    """With another `vigil run` holding the dispatcher lane, the loop `--with-loop`
    starts stands by: the header says so instead of looking like the dispatcher."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    with (tmp_path / "first.out").open("wb") as out:
        first = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"], env=env, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + WAIT_S
        while not vigil("status").stdout.startswith("loop: running (pid "):
            assert time.monotonic() < deadline, "the first vigil run never started"
            time.sleep(0.1)
        tui = f"env {UNSIZED} TERM=xterm-256color {sys.executable} -m vigil --home {home} tui --with-loop"
        with started(tmp_path, "vigil-standby", 160, 30, f"{tui}; sleep 60") as pane:
            said = f"on standby: pid {first.pid} has the lane"
            wait_screen(pane, lambda s: said in s, "standby said, and who dispatches")
            pane.keys("q")
            wait_screen(pane, lambda s: "will be stopped" in s, "the quit question")
            pane.keys("Enter")
            wait_screen(pane, lambda s: "stopped the background loop" in s, "the standby loop stopped")
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=WAIT_S) == 0
