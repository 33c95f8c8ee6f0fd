"""Acceptance fixtures: the real `vigil run` in a subprocess on a test home whose
`sleeper` skill runs tests/daemon/agent.py through the command executor."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from tests.conftest import VigilRunner

AGENT = Path(__file__).resolve().parent / "agent.py"
SAFETY_S = 30.0  # generous bound on any wait: only stops a broken test from hanging

CONFIG = """\
[dispatch]
executor = "dry-run"
timeout = "2m"
max_retries = 2
retry_backoff = "1s"
heartbeat = "500ms"
shutdown_grace = "{grace}"
"""


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    env["COLUMNS"] = "200"  # one log record per line on the console
    return env


@dataclass
class Markers:
    """What tests/daemon/agent.py wrote."""

    path: Path

    def lines(self) -> list[list[str]]:
        if not self.path.exists():
            return []
        return [line.split() for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def starts(self) -> list[dict[str, int]]:
        keys = ("task", "attempt", "pid", "start", "ppid", "child")
        return [dict(zip(keys, map(int, p[1:]), strict=True)) for p in self.lines() if p[0] == "start"]

    def ends(self) -> list[tuple[int, int]]:
        return [(int(p[1]), int(p[2])) for p in self.lines() if p[0] == "end"]

    def overlaps(self) -> list[list[str]]:
        return [p for p in self.lines() if p[0] == "overlap"]


@dataclass
class RunningVigil:
    """One `vigil run` process; its console log goes to a file."""

    proc: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes] = field(repr=False)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=SAFETY_S)


def wait_until(what: str, check: Callable[[], object], timeout_s: float = SAFETY_S) -> object:
    """Poll ``check`` until it returns something truthy; fail the test after the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state != b"Z"


@pytest.fixture
def markers(tmp_path: Path) -> Markers:
    return Markers(tmp_path / "markers.txt")


@pytest.fixture
def configure(home: Path, markers: Markers) -> Callable[..., None]:
    """Write the test home's vigil.toml and its `sleeper` skill."""

    def write(grace: str = "1s") -> None:
        (home / "vigil.toml").write_text(CONFIG.format(grace=grace), encoding="utf-8")
        skill = home / "skills" / "sleeper"
        skill.mkdir(parents=True, exist_ok=True)
        command = json.dumps([sys.executable, str(AGENT), str(markers.path)])
        (skill / "SKILL.md").write_text(
            f"---\ndescription: Sleeps like a slow agent.\ncommand: {command}\n---\nSleep.\n", encoding="utf-8"
        )

    write()
    return write


@pytest.fixture
def start_vigil(home: Path, tmp_path: Path, markers: Markers) -> Iterator[Callable[[], RunningVigil]]:
    """Start `vigil run` processes; every one (and every agent) is gone after the test."""
    started: list[RunningVigil] = []

    def start() -> RunningVigil:
        log_path = tmp_path / f"vigil-run-{len(started) + 1}.log"
        log = log_path.open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=clean_env(),
        )
        running = RunningVigil(proc, log_path, log)
        started.append(running)
        return running

    yield start
    for running in started:
        if running.proc.poll() is None:
            running.proc.kill()
        running.proc.wait()
        running._log.close()
    for start_marker in markers.starts():
        for pid in (start_marker["pid"], start_marker["child"]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def add_sleeper(vigil: VigilRunner, subject: str, **spec: float) -> int:
    """Add a task for the sleeper skill; returns its id."""
    out = vigil("task", "add", subject, "--skills", "sleeper", "-d", json.dumps(spec), "--json", check=True)
    return int(json.loads(out.stdout)["id"])


def task_json(vigil: VigilRunner, task_id: int) -> dict[str, object]:
    return dict(json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout))


def status_json(vigil: VigilRunner) -> dict[str, object]:
    return dict(json.loads(vigil("status", "--json", check=True).stdout))


def dispatcher_state(vigil: VigilRunner) -> str | None:
    d = status_json(vigil)["dispatcher"]
    assert isinstance(d, dict)
    return d.get("state") if d.get("alive") else None
