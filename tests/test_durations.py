"""`make test`'s durations file (tests/durations.py): two pytest runs, one on xdist
workers, leave one list of every test, slowest first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # three pytest processes

PROJECT = {
    "test_quick.py": "def test_one(): pass\n\ndef test_two(): pass\n",
    "test_slow.py": "import time\n\ndef test_sleeps(): time.sleep(0.5)\n",
    "test_fixture.py": (
        "import time, pytest\n\n@pytest.fixture\ndef slow_setup():\n    time.sleep(0.3)\n\n"
        "def test_setup_counts(slow_setup): pass\n"
    ),
}


def pytest_run(folder: Path, durations: Path, *args: str) -> None:
    plugins = ["-p", "tests.durations", "-p", "no:cacheprovider"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, f"--durations-file={durations}", *args],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_two_runs_leave_every_test_once_slowest_first(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    for name, text in PROJECT.items():
        (folder / name).write_text(text)
    durations = tmp_path / "durations"
    pytest_run(folder, durations, "-n", "2", "test_quick.py", "test_slow.py")
    pytest_run(folder, durations, "-n", "0", "test_fixture.py")

    rows = [line.split("\t") for line in durations.read_text(encoding="utf-8").splitlines()]
    seconds = [float(s) for s, _ in rows]
    by_test = {test: float(s) for s, test in rows}
    assert len(by_test) == len(rows)  # each test once
    assert set(by_test) == {
        "test_quick.py::test_one",
        "test_quick.py::test_two",
        "test_slow.py::test_sleeps",
        "test_fixture.py::test_setup_counts",
    }
    assert seconds == sorted(seconds, reverse=True)
    assert by_test["test_slow.py::test_sleeps"] >= 0.5  # a sleep lasts at least as long as asked
    assert by_test["test_fixture.py::test_setup_counts"] >= 0.3  # its fixture's setup counted
