"""Keeps the benchmark harness from rotting: a quick run of the store workload in a
real subprocess. It never looks at a timing, only at what the run reports."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import __main__ as entry

REPO = Path(__file__).resolve().parents[2]
PEERS = ("huey", "persistqueue", "litequeue")


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.slow
def test_quick_store_run_reports_every_workload_with_its_durability() -> None:
    missing = [name for name in PEERS if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"benchmark peers not installed ({', '.join(missing)}): pip install -e '.[bench]'")
    proc = _bench("--quick", "--only", "store_ops")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("machine: ")
    assert "SQLite" in out
    for title in ("One task added", "Sensor batch insert, 10 % new keys", "Claim with a long history"):
        assert f"=== {title}" in out
    for contender in ("plain sqlite3, same table", "huey SqliteHuey enqueue", "persist-queue", "litequeue put"):
        assert contender in out
    assert "synchronous=FULL, WAL" in out
    assert "Query plan of the claim" in out
    assert "ix_tasks_claim" in out
    assert out.count("(target ≥") >= 3  # each target is judged, met or not
    assert "--- bench.store_ops: ok" in out


def test_unknown_workload_is_one_line_and_exit_2() -> None:
    proc = _bench("--only", "no_such_workload")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"python -m bench: error: unknown workload no_such_workload; choose from {', '.join(entry.WORKLOADS)}"
    ]


def test_a_workload_module_not_written_yet_is_skipped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(entry, "WORKLOADS", ("not_written_yet",))
    assert entry.main(["--only", "not_written_yet"]) == 0
    assert "bench.not_written_yet: skipped (module not there yet)" in capsys.readouterr().out


@pytest.mark.slow
def test_quick_workspace_run_compares_the_clone_with_a_worktree() -> None:
    proc = _bench("--quick", "--only", "workspace")
    assert proc.returncode == 0, proc.stderr
    assert "=== A repository task's workspace" in proc.stdout
    assert "| git worktree add |" in proc.stdout
    assert "| Vigil's clone |" in proc.stdout
    assert re.search(r"time \d+\.\d\d× \(target ≤ 1\.5×: (met|MISSED)\), disk \d+\.\d\d×", proc.stdout)
