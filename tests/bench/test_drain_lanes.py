"""The drain_lanes workload runs every configuration, and skips with a reason when
no PostgreSQL server can be reached. It never looks at a timing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _drain_lanes(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.drain_lanes", "--quick"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


def test_no_server_is_a_skip_with_the_reason() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    env["VIGIL_TEST_POSTGRES_URL"] = "postgresql://vigil@127.0.0.1:1/nowhere"
    proc = _drain_lanes(env)
    assert proc.returncode == 0, proc.stderr
    (skipped,) = [line for line in proc.stdout.splitlines() if line.startswith("skipped:")]
    assert "no PostgreSQL server" in skipped
    assert "Connection refused" in skipped or "connection refused" in skipped.lower()


@pytest.mark.slow
def test_a_quick_run_drains_with_every_configuration(postgres_server: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    env["VIGIL_TEST_POSTGRES_URL"] = postgres_server
    proc = _drain_lanes(env)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("| SQLite |", "| PostgreSQL |"))]
    assert [row.split("|")[1:3] for row in rows] == [
        [" SQLite ", " 1 "],
        [" PostgreSQL ", " 1 "],
        [" PostgreSQL ", " 2 "],
        [" PostgreSQL ", " 4 "],
        [" PostgreSQL ", " 8 "],
    ]
    assert "fsync=" in proc.stdout
