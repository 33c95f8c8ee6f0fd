"""The README's five-minute tour runs as written: its commands are read from
README.md and run one by one in a fresh home under a fresh $HOME, with the
repository's .venv on PATH as `. .venv/bin/activate` puts it. Each must succeed;
a comment that promises `created task #N` or `exists: task #N` must come true.
The commands that keep running (`vigil events --follow`, `vigil run`, `vigil tui`)
are started, seen working, and stopped as a person would (Ctrl-C, q)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).parents[2]
WAIT_S = 60.0  # safety net only


def tour() -> list[tuple[list[str], str]]:
    """The tour's commands (argv, and the comment after it), in order."""
    text = (REPO / "README.md").read_text()
    block = text.split("## A five-minute tour", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    steps = []
    for line in block.splitlines():
        argv = shlex.split(line, comments=True)
        if argv:
            comment = line.split("#", 1)[1].strip() if "  #" in line else ""
            steps.append((argv, comment))
    return steps


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


class Shell:
    """What a person's shell does with the tour's lines: ``~`` is $HOME, ``export``
    sets a variable, ``.venv/bin`` is on PATH."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
        self.env.update(HOME=str(home), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")

    def expand(self, argv: list[str]) -> list[str]:
        return [str(self.home / arg[2:]) if arg.startswith("~/") else arg for arg in argv]

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        if argv[:2] == ["cp", "-r"]:  # the shell expands skills/*
            sources = sorted(str(p) for p in (REPO / "skills").iterdir())
            argv = ["cp", "-r", *sources, *self.expand(argv[3:])]
        return subprocess.run(
            self.expand(argv), cwd=REPO, env=self.env, capture_output=True, text=True, timeout=WAIT_S, check=False
        )

    def start(self, argv: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.expand(argv), cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def vigil(self, *args: str) -> str:
        return self.run(["vigil", *args]).stdout


def interrupt(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Ctrl-C, as a person ends it; returns its exit code and stderr."""
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=WAIT_S)
    return proc.returncode, err


def follow_events(shell: Shell, argv: list[str]) -> None:
    proc = shell.start(argv)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the audit trail so far, printed at once
    assert "created" in first, first
    code, err = interrupt(proc)
    assert code == 0, err


def run_loop(shell: Shell, argv: list[str]) -> None:
    proc = shell.start(argv)
    try:
        wait_until(lambda: shell.vigil("status").startswith("loop: running"), "vigil run to be running")
        # the answered deploy runs again and completes with the answer
        wait_until(lambda: json.loads(shell.vigil("task", "show", "3", "--json"))["status"] == "completed", "#3")
        assert json.loads(shell.vigil("task", "show", "3", "--json"))["result_summary"] == "deploying to staging"
    finally:
        code, err = interrupt(proc)
    assert code == 0, err


def open_tui(shell: Shell, argv: list[str]) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the tour's `vigil tui` needs a terminal")
    socket = shell.home / "tmux.sock"
    command = " ".join(shlex.quote(a) for a in ["env", *(f"{k}={v}" for k, v in shell.env.items()), *argv])
    tmux = ["tmux", "-S", str(socket)]
    subprocess.run([*tmux, "new-session", "-d", "-s", "tour", "-x", "100", "-y", "30", command], check=True)
    try:

        def screen() -> str:
            shown = subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", "tour"], capture_output=True, text=True, check=False
            )
            return shown.stdout

        wait_until(lambda: "Deploy the release" in screen(), "the dashboard with the tour's tasks")
        subprocess.run([*tmux, "send-keys", "-t", "tour", "q"], check=True)
        wait_until(lambda: "it started no loop" in screen() or not screen().strip(), "q to quit the dashboard")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)


LONG_RUNNING: dict[tuple[str, ...], Callable[[Shell, list[str]], None]] = {
    ("vigil", "events", "--follow"): follow_events,
    ("vigil", "run"): run_loop,
    ("vigil", "tui"): open_tui,
}


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    shell = Shell(tmp_path)
    steps = tour()
    assert steps[0][0][:1] == ["make"]  # sets up .venv: done already, here
    assert steps[1][0] == [".", ".venv/bin/activate"]  # .venv/bin is on PATH here
    assert not any(argv[:2] == ["make", "test"] for argv, _ in steps)  # the tour does not need the suite
    ran = []
    for argv, comment in steps[2:]:
        if argv[0] == "export":
            name, value = argv[1].split("=", 1)
            shell.env[name] = shell.expand([value])[0]
            continue
        long_running = LONG_RUNNING.get(tuple(argv))
        if long_running is not None:
            long_running(shell, argv)
            ran.append(argv)
            continue
        done = shell.run(argv)
        assert done.returncode == 0, f"{shlex.join(argv)} exited {done.returncode}: {done.stderr}"
        promised = re.match(r"(created task|exists: task) #(\d+)", comment)
        if promised:
            assert done.stdout.startswith(promised.group(0)), f"{shlex.join(argv)}: {done.stdout}"
        ran.append(argv)
    assert ["vigil", "task", "answer", "3", "staging"] in ran
    assert len(ran) == len(steps) - 3  # every step ran (make, activate and export aside)
