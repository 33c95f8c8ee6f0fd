"""The TUI calls a killed ``vigil run`` died at once, as ``vigil status`` does: it asks
the dispatcher lanes' locks, which the kernel frees the moment their holder dies,
not only the heartbeat, which goes stale only after three missed beats (three
hours on this home, so a stale heartbeat cannot be what the test sees)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import Static

from tests.conftest import VigilRunner
from tests.tui.conftest import PROBE_S, wait_for
from tests.tui.helpers import queue
from tui.app import VigilApp
from tui.tabs import LoopLine
from vigil.clock import SystemClock
from vigil.config import load_settings
from vigil.liveness import LoopCondition
from vigil.store import open_store

pytestmark = pytest.mark.slow  # a real `vigil run`

CONFIG = """\
[dispatch]
executor = "dry-run"
heartbeat = "1h"
lease = "3h"
"""

START_S = 60.0  # safety net only: a loaded machine starts Python slowly


async def test_a_killed_vigil_run_is_died_at_once(home: Path, tmp_path: Path, vigil: VigilRunner) -> None:
    (home / "vigil.toml").write_text(CONFIG, encoding="utf-8")
    settings = load_settings(home)
    clock = SystemClock()  # the heartbeat `vigil run` writes is judged at its own time
    app = VigilApp(settings, opener=lambda: open_store(settings, clock), clock=clock, probe_interval_s=PROBE_S)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    with (tmp_path / "run.out").open("w") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"], stdout=out, stderr=out, env=env
        )
    try:
        async with app.run_test(size=(120, 30)) as pilot:

            def header() -> str:
                return str(queue(app).query_one("#loop", Static).render())

            def beating() -> bool:  # its heartbeat read: before it, the lock alone says it runs
                beat = None if app.ctx.loop is None else app.ctx.loop.health(clock.now_ms()).heartbeat
                return beat is not None and beat.pid == run.pid

            await wait_for(beating, "the loop's first heartbeat", timeout_s=START_S)
            await wait_for(lambda: "○ idle" in header(), "the queue's header: the loop running, idle")
            assert app.ctx.loop is not None
            assert app.ctx.loop.health(clock.now_ms()).condition is LoopCondition.RUNNING

            run.kill()
            run.wait(timeout=START_S)
            await wait_for(lambda: "died" in header(), "the queue's header to say died", timeout_s=START_S)
            assert f"pid {run.pid} no longer holds the dispatcher lock" in header()
            # Every other screen's loop line says it too.
            await pilot.press("3")
            await wait_for(lambda: app.screen is app.get_screen("history"), "the history screen")
            line = app.screen.query_one(LoopLine)
            await wait_for(lambda: "died" in str(line.render()), "the history screen's loop line to say died")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=START_S)
    assert vigil("status", check=True).stdout.startswith(f"loop: DIED: pid {run.pid} ")
