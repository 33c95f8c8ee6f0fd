"""The bad-input table: one line on stderr, exit 2, no traceback, the database untouched.

The table runs the CLI in this process (``vigil_in_process``); the tests of a
missing home, a folder that is not one and usage errors run the real binary."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import VigilRunner


def snapshot(home: Path) -> list[tuple[object, ...]]:
    """Every row of every table, to prove a failed command changed nothing."""
    conn = sqlite3.connect(home / "data" / "vigil.db")
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return [(t, *row) for t in tables for row in conn.execute(f"SELECT * FROM {t}")]
    finally:
        conn.close()


@pytest.fixture
def seeded(vigil_in_process: VigilRunner) -> VigilRunner:
    vigil_in_process("task", "add", "pending task", check=True)  # 1
    vigil_in_process("task", "add", "to cancel", check=True)  # 2
    vigil_in_process("task", "cancel", "2", check=True)
    return vigil_in_process


BAD_INPUT = [
    (["task", "add", ""], "subject must not be empty"),
    (["task", "add", "   "], "subject must not be empty"),
    (["task", "add", "x", "-p", "high"], "priority must be an integer"),
    (["task", "add", "x", "-p", "0"], "priority must be 1-9"),
    (["task", "add", "x", "-p", "10"], "priority must be 1-9"),
    (["task", "add", "x", "--at", "tomorrow-ish"], "invalid time"),
    (["task", "add", "x", "--in", "5 fortnights"], "invalid duration"),
    (["task", "add", "x", "--in", "10"], "invalid duration"),
    (["task", "add", "x", "--at", "2030-01-01", "--in", "1h"], "not both"),
    (["task", "add", "x", "--dedup", "ever"], "--dedup needs --key"),
    (["task", "add", "x", "--depends-on", "999"], "task #999 not found"),
    (["task", "add", "x", "--depends-on", "3"], "task #3 not found"),  # the id it would get itself
    (["task", "add", "x", "--depends-on", "one"], "expected task ids"),
    (["task", "add", "x", "--parent", "999"], "task #999 not found"),
    (["task", "show", "999"], "task #999 not found"),
    (["task", "prio", "999", "3"], "task #999 not found"),
    (["task", "prio", "1", "11"], "priority must be 1-9"),
    (["task", "prio", "2", "3"], "task #2 is canceled, cannot change its priority"),
    (["task", "defer", "1", "whenever"], "invalid time"),
    (["task", "defer", "2", "1h"], "task #2 is canceled, cannot defer it"),
    (["task", "retry", "1"], "task #1 is pending, cannot retry it"),
    (["task", "cancel", "2"], "task #2 is canceled, cannot cancel"),
    (["task", "close", "2", "--status", "completed", "--summary", "x"], "task #2 is canceled, cannot close"),
    (["task", "close", "1", "--status", "completed", "--summary", " "], "--summary must not be empty"),
    (["task", "note", "1", "  "], "note text must not be empty"),
    (["task", "note", "999", "hello"], "task #999 not found"),
    (["stats", "--since", "forever"], "invalid duration"),
    (["task", "list", "--status", "done"], "unknown status 'done'"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    home: Path, seeded: VigilRunner, args: list[str], message: str
) -> None:
    before = snapshot(home)
    result = seeded(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert snapshot(home) == before


def run_bad_home(vigil: VigilRunner, expected: str) -> None:
    result = vigil("task", "list")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert expected in result.stderr


def test_home_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    for args, given_by in ((["--home", str(missing)], "--home"), ([], "VIGIL_HOME")):
        result = subprocess.run(
            [sys.executable, "-m", "vigil", *args, "task", "list"],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "VIGIL_HOME": str(missing)},
        )
        assert result.returncode == 2
        assert result.stderr == (
            f"vigil: error: home {missing} (from {given_by}) does not exist; create it with 'vigil init {missing}'\n"
        )
        assert not missing.exists()


def test_config_that_is_not_toml(home: Path, vigil_in_process: VigilRunner) -> None:
    (home / "vigil.toml").write_text("[dispatch\nexecutor = ")
    run_bad_home(vigil_in_process, "vigil.toml: not valid TOML")


def test_config_with_a_wrong_type_names_the_key(home: Path, vigil_in_process: VigilRunner) -> None:
    (home / "vigil.toml").write_text('[dispatch]\nmax_retries = "three"\n')
    run_bad_home(vigil_in_process, "[dispatch] max_retries: expected an integer")


def test_config_with_an_unknown_key(home: Path, vigil_in_process: VigilRunner) -> None:
    (home / "vigil.toml").write_text('[dispatch]\nexecuter = "claude"\n')
    run_bad_home(vigil_in_process, "[dispatch] unknown key 'executer'")


def test_database_that_is_not_a_database(home: Path, vigil_in_process: VigilRunner) -> None:
    db = home / "data" / "vigil.db"
    db.write_bytes(b"this is not sqlite at all\n" * 100)
    run_bad_home(vigil_in_process, "is not a Vigil database")
    assert db.read_bytes() == b"this is not sqlite at all\n" * 100


def test_database_from_a_newer_version(home: Path, seeded: VigilRunner) -> None:
    db = home / "data" / "vigil.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = snapshot(home)
    run_bad_home(seeded, "schema version 99, newer than")
    assert snapshot(home) == before


def test_folder_that_is_not_a_home_is_refused_and_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "vigil", "--home", str(folder), "task", "add", "x"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"vigil: error: {folder} (from --home) is not a Vigil home: no vigil.toml; run 'vigil init {folder}'\n"
    )
    assert list(folder.iterdir()) == []


def test_usage_errors_are_one_line_with_a_help_hint(vigil: VigilRunner) -> None:
    for args, message in (
        (
            ("task", "show", "abc"),
            "vigil: error: Invalid value for 'TASK_ID': 'abc' is not a valid integer. (see 'vigil task show --help')",
        ),
        (("frobnicate",), "vigil: error: No such command 'frobnicate'. (see 'vigil --help')"),
        (
            ("task", "add"),
            "vigil: error: Missing argument 'SUBJECT' (or --from FILE for many tasks). (see 'vigil task add --help')",
        ),
    ):
        result = vigil(*args)
        assert result.returncode == 2
        assert result.stderr == message + "\n"
