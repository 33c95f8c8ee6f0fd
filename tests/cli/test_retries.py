"""Retries a script or the agent asks for, through the real CLI and the real loop:
exit code 75 (EX_TEMPFAIL) from the command executor, and
``vigil task close ID --status pending --in/--at`` from inside a run."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.conftest import VigilRunner
from vigil.durations import parse_iso_ms


def skill(home: Path, name: str, script: str) -> None:
    """A skill run by the command executor: ``script`` under this Python."""
    folder = home / "skills" / name
    folder.mkdir(parents=True)
    (folder / "run.py").write_text(script)
    command = f'["{sys.executable}", "./run.py"]'
    (folder / "SKILL.md").write_text(f"---\ndescription: {name}\ncommand: {command}\n---\nRuns run.py.\n")


def add(vigil: VigilRunner, *args: str) -> int:
    return int(json.loads(vigil("task", "add", *args, "--json", check=True).stdout)["id"])


def show(vigil: VigilRunner, task_id: int) -> dict[str, object]:
    result: dict[str, object] = json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)
    return result


TEMPFAIL = """
import sys
print("the mail server said 421: try later", file=sys.stderr)
sys.exit(75)
"""

FAILS = """
import sys
print("no such mailbox", file=sys.stderr)
sys.exit(1)
"""


def test_exit_75_is_retried_with_backoff_and_counted(home: Path, vigil: VigilRunner) -> None:
    skill(home, "send-mail", TEMPFAIL)
    task_id = add(vigil, "send the report", "--skills", "send-mail", "--max-retries", "1")

    before = int(time.time() * 1000)
    first = vigil("dispatch", "once")
    assert first.returncode == 0, first.stderr
    task = show(vigil, task_id)
    assert (task["status"], task["attempt_count"]) == ("pending", 1)
    assert parse_iso_ms(str(task["scheduled_for"])) > before  # backed off, not due at once
    runs = task["runs"]
    assert isinstance(runs, list)
    assert runs[0]["outcome"] == "transient"
    assert runs[0]["exit_code"] == 75
    assert "EX_TEMPFAIL" in runs[0]["error"]
    assert "421: try later" in runs[0]["error"]


def test_exit_75_fails_for_good_when_no_retry_is_left(home: Path, vigil: VigilRunner) -> None:
    skill(home, "send-mail", TEMPFAIL)
    task_id = add(vigil, "send the report", "--skills", "send-mail", "--max-retries", "0")
    assert vigil("dispatch", "once").returncode == 0
    task = show(vigil, task_id)
    assert (task["status"], task["attempt_count"]) == ("failed", 1)
    assert str(task["result_summary"]).startswith("gave up after 1 attempt: ")


def test_any_other_exit_code_fails_at_once(home: Path, vigil: VigilRunner) -> None:
    skill(home, "send-mail", FAILS)
    task_id = add(vigil, "send the report", "--skills", "send-mail", "--max-retries", "3")
    assert vigil("dispatch", "once").returncode == 0
    task = show(vigil, task_id)
    assert (task["status"], task["attempt_count"]) == ("failed", 1)


# The agent's side of a requested retry: it closes its own task as pending, then ends.
ASKS = """
import os, subprocess, sys
subprocess.run(
    [sys.executable, "-m", "vigil", "task", "close", os.environ["VIGIL_TASK_ID"], "--status", "pending",
     "--in", "1h", "--summary", "the upstream release is not out yet"],
    check=True,
)
print('{"status": "completed", "summary": "asked for a later retry"}')
"""


def test_the_agent_asks_for_a_later_retry(home: Path, vigil: VigilRunner) -> None:
    skill(home, "wait-release", ASKS)
    task_id = add(vigil, "package the release", "--skills", "wait-release", "--max-retries", "2")

    before = int(time.time() * 1000)
    result = vigil("dispatch", "once")
    assert result.returncode == 0, result.stderr
    task = show(vigil, task_id)
    assert (task["status"], task["attempt_count"]) == ("pending", 1)  # the attempt counts
    assert task["result_summary"] == "the upstream release is not out yet"
    due = parse_iso_ms(str(task["scheduled_for"]))
    # task show prints whole seconds: compare at that precision
    assert before // 1000 * 1000 + 3_600_000 <= due <= int(time.time() * 1000) + 3_600_000
    assert task["claimed_by"] is None  # the dispatcher recorded the run and let go
    runs = task["runs"]
    assert isinstance(runs, list)
    assert [r["outcome"] for r in runs] == ["success"]
    events = task["events"]
    assert isinstance(events, list)
    changes = [(e["actor"], e["from"], e["to"]) for e in events if e["kind"] == "status"]
    assert changes == [("dispatcher", "pending", "active"), ("agent", "active", "pending")]
    assert vigil("dispatch", "once").returncode == 3  # not due for an hour


def test_a_requested_retry_with_none_left_fails_the_task(home: Path, vigil: VigilRunner) -> None:
    skill(home, "wait-release", ASKS)
    task_id = add(vigil, "package the release", "--skills", "wait-release", "--max-retries", "0")
    assert vigil("dispatch", "once").returncode == 0
    task = show(vigil, task_id)
    assert (task["status"], task["attempt_count"]) == ("failed", 1)
    assert task["result_summary"] == "gave up after 1 attempt: the upstream release is not out yet"


def test_close_as_pending_from_the_cli_says_when_and_refuses_what_it_cannot(home: Path, vigil: VigilRunner) -> None:
    task_id = add(vigil, "not running")
    inside = {"VIGIL_TASK_ID": str(task_id)}
    close = ("task", "close", str(task_id), "--summary", "later")

    refused = vigil(*close, "--status", "pending", "--in", "1h", env=inside)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"vigil: error: task #{task_id} is pending, cannot ask for a retry (only a running task can)"
    )
    for args, message in (
        (("--status", "pending"), "--status pending needs --in or --at (when to try again)"),
        (("--status", "pending", "--in", "1h", "--at", "2030-01-01T00:00:00Z"), "not both"),
        (("--status", "completed", "--in", "1h"), "--at and --in go with --status pending (a later retry)"),
        (("--status", "pending", "--at", "2001-01-01T00:00:00Z"), "--at: the retry time is in the past"),
        (("--status", "pending", "--in", "soon"), "invalid duration 'soon'"),
    ):
        bad = vigil(*close, *args, env=inside)
        assert bad.returncode == 2, args
        assert message in bad.stderr, bad.stderr
        assert bad.stderr.count("\n") == 1, bad.stderr
    assert show(vigil, task_id)["status"] == "pending"


def test_the_command_sensor_reports_exit_75_as_temporary(home: Path, vigil: VigilRunner) -> None:
    (home / "poll.py").write_text(TEMPFAIL)
    with (home / "vigil.toml").open("a") as toml:
        toml.write(f'\n[[sensors]]\nuse = "command"\nname = "mail"\ncommand = ["{sys.executable}", "poll.py"]\n')
    result = vigil("sensors", "run", "mail")
    assert result.returncode == 1
    assert result.stdout.strip() == (
        "mail: error: CommandFailed: exited with status 75 (EX_TEMPFAIL: temporary failure, retried with back-off): "
        "the mail server said 421: try later"
    )
    [row] = json.loads(vigil("sensors", "list", "--json", check=True).stdout)
    assert (row["status"], row["consecutive_failures"]) == ("error", 1)
    assert json.loads(vigil("task", "list", "--json", check=True).stdout)["tasks"] == []
