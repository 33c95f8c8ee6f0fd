"""Running ``race_worker`` in several processes on one home: start them, wait until
each has opened the store, then let them go together and collect their reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import REPO

READY_TIMEOUT_S = 60


def run_racers(home: Path, rounds: int, processes: int = 2) -> list[dict[str, Any]]:
    """Each process's JSON report (its last stdout line); asserts each exited 0."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.sensors.race_worker", str(home), str(rounds)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    deadline = time.monotonic() + READY_TIMEOUT_S
    # all have opened the store (a racer that failed instead is reported below); then the start line
    while len(list(home.glob("ready-*"))) < processes and all(proc.poll() is None for proc in procs):
        assert time.monotonic() < deadline, "the racers did not get ready"
        time.sleep(0.01)
    (home / "go").touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results
