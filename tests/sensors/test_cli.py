"""``vigil sensors …`` in a subprocess, and the complete example of docs/sensors.md."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, VigilRunner

pytestmark = pytest.mark.slow

DOC = REPO / "docs" / "sensors.md"
EXAMPLE = re.compile(r"<!-- example: (?P<path>\S+) -->\n```\w*\n(?P<body>.*?)```", re.DOTALL)


def configure(home: Path, toml: str) -> None:
    with (home / "vigil.toml").open("a") as handle:
        handle.write("\n" + toml)


def settled(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    past = time.time() - 60
    os.utime(path, (past, past))


def test_run_and_list_in_a_subprocess(home: Path, vigil: VigilRunner) -> None:
    configure(
        home,
        '[[sensors]]\nuse = "schedule"\nname = "heartbeat"\nevery = "1h"\nsubject = "Heartbeat {date}"\n\n'
        '[[sensors]]\nuse = "inbox"\n\n'
        '[[sensors]]\nuse = "http"\nname = "site"\nurl = "http://127.0.0.1:9/"\ntimeout = "5s"\n',
    )
    settled(home / "inbox" / "bug.md", "Fix the flaky test\nIt fails one run in ten.")

    run = vigil("sensors", "run", "heartbeat", "inbox")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "heartbeat: ok, created 1 (#1), ignored 0",
        "inbox: ok, created 1 (#2), ignored 0",
    ]
    again = vigil("sensors", "run", "heartbeat", "--json")
    assert json.loads(again.stdout)[0] | {"started_at": None, "next_due_at": None, "duration_ms": 0} == {
        "name": "heartbeat",
        "status": "ok",
        "created": 0,
        "created_ids": [],
        "ignored": 0,  # the cursor knows this hour's task exists
        "dropped": 0,
        "rejected": 0,
        "error": None,
        "started_at": None,
        "duration_ms": 0,
        "next_due_at": None,
    }

    failed = vigil("sensors", "run")  # all enabled: the unreachable site fails
    assert failed.returncode == 1
    assert "site: error: ConnectError" in failed.stdout
    assert "Traceback" not in failed.stderr

    listed = json.loads(vigil("sensors", "list", "--json", check=True).stdout)
    by_name = {row["name"]: row for row in listed}
    assert list(by_name) == ["heartbeat", "inbox", "site"]
    assert by_name["heartbeat"]["schedule"] == "every 1h"
    assert (by_name["inbox"]["status"], by_name["inbox"]["created_last"]) == ("ok", 0)
    assert by_name["site"]["status"] == "error"
    assert by_name["site"]["consecutive_failures"] == 1
    assert by_name["site"]["error"].startswith("ConnectError")
    # its back-off skips the next run, which is recorded as skipped
    (skip,) = by_name["site"]["skips"]
    assert (skip["reason"], skip["runs"], skip["first_at"] == skip["last_at"]) == ("backoff", 1, True)
    assert (by_name["site"]["catch_up"], by_name["inbox"]["skips"]) == ("once", [])
    table = vigil("sensors", "list", check=True).stdout
    assert table.splitlines()[0].split() == [
        "NAME", "SCHEDULE", "ENABLED", "LAST", "RUN", "STATUS", "NEXT", "DUE", "NEW", "DUP", "FAILS", "SKIPPED"
    ]  # fmt: skip
    assert table.splitlines()[3].split()[-2:] == ["1", "backoff"]  # the site's row
    assert "site: ConnectError" in table

    skipped = vigil("sensors", "skips", check=True).stdout.splitlines()
    assert skipped[0].split() == ["NAME", "REASON", "RUNS", "FIRST", "DUE", "LAST", "DUE"]
    assert skipped[1].split()[:3] == ["site", "backoff", "1"]
    assert json.loads(vigil("sensors", "skips", "site", "--json", check=True).stdout) == [{"name": "site"} | skip]
    assert vigil("sensors", "skips", "inbox", check=True).stdout.strip() == "no skipped runs"
    assert vigil("sensors", "skips", "nope").returncode == 2

    tasks = json.loads(vigil("task", "list", "--json", check=True).stdout)["tasks"]
    assert sorted(t["subject"] for t in tasks)[0] == "Fix the flaky test"
    assert (home / "inbox" / "done" / "bug.md").exists()


def test_enable_and_disable(home: Path, vigil: VigilRunner) -> None:
    configure(home, '[[sensors]]\nuse = "queue_health"\n\n[[sensors]]\nuse = "inbox"\nenabled = false\n')
    assert vigil("sensors", "disable", "queue_health", check=True).stdout.strip() == "sensor queue_health disabled"
    rows = {r["name"]: r for r in json.loads(vigil("sensors", "list", "--json", check=True).stdout)}
    assert (rows["queue_health"]["enabled"], rows["queue_health"]["disabled_by"]) == (False, "command")
    assert (rows["inbox"]["enabled"], rows["inbox"]["disabled_by"]) == (False, "config")
    assert vigil("sensors", "run", check=True).stdout.strip() == "no enabled sensors to run"
    assert vigil("sensors", "enable", "queue_health", check=True).stdout.strip() == "sensor queue_health enabled"
    enabled = vigil("sensors", "enable", "inbox", check=True).stdout
    assert "vigil.toml sets enabled = false" in enabled

    unknown = vigil("sensors", "disable", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == "vigil: error: unknown sensor 'nope' (sensors: queue_health, inbox)"
    assert vigil("sensors", "run", "nope").returncode == 2


def test_a_bad_entry_is_one_line_naming_it(home: Path, vigil: VigilRunner) -> None:
    configure(home, '[[sensors]]\nuse = "inbox"\n\n[[sensors]]\nuse = "inbx"\nname = "mail"\n')
    for args in (("sensors", "list"), ("sensors", "run"), ("run",)):  # `vigil run` refuses to start
        result = vigil(*args)
        assert result.returncode == 2
        assert result.stderr.startswith("vigil: error: vigil.toml: [[sensors]] #2 (name 'mail'): unknown use 'inbx'")
        assert len(result.stderr.strip().splitlines()) == 1


def test_the_complete_example_of_the_docs_runs_as_written(home: Path, vigil: VigilRunner) -> None:
    examples = {m["path"]: m["body"] for m in EXAMPLE.finditer(DOC.read_text())}
    assert sorted(examples) == ["my_sensors/todos.py", "scripts/big_logs.sh", "vigil.toml"]
    for path, body in examples.items():
        if path == "vigil.toml":
            configure(home, body)
        else:
            (home / path).parent.mkdir(parents=True, exist_ok=True)
            (home / path).write_text(body)
    (home / "notes").mkdir()
    (home / "notes" / "plan.md").write_text("# Plan\n\n- TODO: write the release notes\n- done: tests\nTODO: tag v1\n")
    (home / "logs").mkdir(exist_ok=True)
    with (home / "logs" / "app.log").open("wb") as handle:
        handle.truncate(11 * 1024 * 1024)
    (home / "logs" / "small.log").write_text("fine")

    result = vigil("sensors", "run", "todos", "big-logs")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "todos: ok, created 2 (#1, #2), ignored 0",
        "big-logs: ok, created 1 (#3), ignored 0",
    ]
    tasks = {t["subject"]: t for t in json.loads(vigil("task", "list", "--json", check=True).stdout)["tasks"]}
    assert set(tasks) == {"write the release notes", "tag v1", "Log file logs/app.log is 11 MiB"}
    assert tasks["tag v1"]["source"] == "sensor:todos"
    assert tasks["Log file logs/app.log is 11 MiB"]["priority"] == 6
    assert tasks["Log file logs/app.log is 11 MiB"]["source_key"] == "big-logs:logs/app.log:11"
    rerun = vigil("sensors", "run", "todos", "big-logs", check=True)
    assert "created 0" in rerun.stdout.splitlines()[0]
