"""The skip summary that ends `make test`: two pytest runs, one on xdist workers,
append to one report, and the block counts their skipped tests by reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.skips import summary

PROJECT = {
    "test_marks.py": """
import pytest

@pytest.mark.skipif(True, reason="tmux is not installed: install tmux to run them")
def test_by_mark(): pass

@pytest.mark.parametrize("n", [1, 2])
def test_by_call(n):
    pytest.skip("needs root: run the tests as root")

@pytest.mark.xfail(reason="an expected failure is not a skip")
def test_expected_failure():
    assert False

def test_runs(): pass
""",
    "test_module.py": """
import pytest

pytest.importorskip("no_such_module_here")

def test_never_collected(): pass
""",
    "test_alone.py": """
import pytest

@pytest.mark.skipif(True, reason="tmux is not installed: install tmux to run them")
def test_alone(): pass
""",
}


def pytest_run(folder: Path, report: Path, *args: str) -> None:
    plugins = ["-p", "tests.skips", "-p", "no:cacheprovider"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, f"--skip-report={report}", *args],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_two_runs_one_on_workers_are_summed_up_by_reason(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    for name, text in PROJECT.items():
        (folder / name).write_text(text)
    report = tmp_path / "skips.jsonl"
    pytest_run(folder, report, "-n", "2", "test_marks.py", "test_module.py")
    pytest_run(folder, report, "-n", "0", "test_alone.py")

    proc = subprocess.run(
        [sys.executable, "-m", "tests.skips", str(report)], capture_output=True, text=True, check=False, timeout=60
    )

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "Skipped tests: 5, by reason (each says what would run them):",
        "  2  needs root: run the tests as root",
        "  2  tmux is not installed: install tmux to run them",
        "  1  could not import 'no_such_module_here': No module named 'no_such_module_here'",
    ]


def test_a_run_that_skipped_nothing_says_so() -> None:
    assert summary([]) == "Skipped tests: none."


def test_an_unreadable_report_is_one_line_and_a_failure(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.skips", str(tmp_path / "missing.jsonl")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr == f"tests.skips: cannot read {tmp_path / 'missing.jsonl'}: No such file or directory\n"
