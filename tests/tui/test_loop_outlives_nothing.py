"""A loop started by `vigil tui --with-loop` does not outlive a TUI that dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux only"),
    pytest.mark.slow,
]

PARENT = """
import sys, time
from pathlib import Path
from tui.loop_process import BackgroundLoop
loop = BackgroundLoop(Path(sys.argv[1]), Path(sys.argv[1]) / "logs")
print(loop.start(), flush=True)
time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_loop_gets_sigterm_when_the_tui_is_killed(home: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(home)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    loop_pid = int(parent.stdout.readline())
    try:
        out = home / "logs" / "loop.out"
        deadline = time.monotonic() + 30
        while "dispatcher" not in out.read_text(errors="replace") and time.monotonic() < deadline:
            time.sleep(0.1)  # the loop is up once it has logged its start
        assert alive(loop_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30
        while alive(loop_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(loop_pid)
        assert "stopped" in (home / "logs" / "loop.out").read_text(errors="replace").lower()
    finally:
        parent.stdout.close()
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if alive(loop_pid):
            os.kill(loop_pid, signal.SIGKILL)
