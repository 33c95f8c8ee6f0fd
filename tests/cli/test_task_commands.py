"""Acceptance tests: the real `vigil` in a subprocess, one test per command."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from vigil.config import load_settings
from vigil.models import Outcome, OutcomeKind
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow


def add(vigil: VigilRunner, *args: str) -> int:
    out = vigil("task", "add", *args, "--json", check=True).stdout
    data = json.loads(out)
    assert data["created"] is True
    return int(data["id"])


def show(vigil: VigilRunner, task_id: int) -> dict[str, object]:
    result: dict[str, object] = json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)
    return result


def make_skills(home: Path, *names: str) -> None:
    """A task's skills must exist in the home: ``skills/<name>/SKILL.md``."""
    for name in names:
        (home / "skills" / name).mkdir(parents=True, exist_ok=True)
        (home / "skills" / name / "SKILL.md").write_text(f"---\ndescription: {name}\n---\nDo {name}.\n")


def claim_and_finish(home: Path, outcome: Outcome | None) -> int:
    """Act as a dispatcher on the same file: claim the next task, optionally record
    ``outcome`` for it."""

    async def work() -> int:
        store = await SqliteStore.open(load_settings(home).store.path)
        try:
            claim = await store.claim_next(worker="test-worker", lease_ms=60_000)
            assert claim is not None
            if outcome is not None:
                await store.record(claim, outcome, worker="test-worker")
            return claim.task.id
        finally:
            await store.close()

    return asyncio.run(work())


def test_init_creates_a_home(tmp_path: Path, vigil: VigilRunner) -> None:
    target = tmp_path / "new-home"
    result = vigil("init", str(target), check=True)
    assert (target / "vigil.toml").is_file()
    assert (target / "skills").is_dir()
    assert (target / "logs").is_dir()
    assert "created" in result.stdout
    assert 'executor = "dry-run"' in (target / "vigil.toml").read_text()
    again = vigil("init", str(target))
    assert again.returncode == 2
    assert "already a Vigil home" in again.stderr


def test_add_prints_id_and_reports_existing_key(vigil: VigilRunner) -> None:
    first = vigil("task", "add", "Check the inbox", "--key", "inbox:1", check=True)
    assert first.stdout.strip() == "created task #1"
    second = vigil("task", "add", "Check the inbox again", "--key", "inbox:1")
    assert second.returncode == 0
    assert "exists: task #1" in second.stdout
    data = json.loads(vigil("task", "add", "dup", "--key", "inbox:1", "--json", check=True).stdout)
    assert data == {"id": 1, "created": False, "task": data["task"]}
    assert data["task"]["subject"] == "Check the inbox"


def test_add_with_every_option(home: Path, vigil: VigilRunner) -> None:
    make_skills(home, "web", "triage")
    parent = add(vigil, "parent")
    dep = add(vigil, "dependency")
    child = add(
        vigil,
        "child",
        "-d",
        "details here",
        "-p",
        "2",
        "--skills",
        "web,triage",
        "--in",
        "2h",
        "--key",
        "k-child",
        "--dedup",
        "ever",
        "--source",
        "script",
        "--parent",
        str(parent),
        "--depends-on",
        str(dep),
        "--max-retries",
        "5",
    )
    task = show(vigil, child)
    assert task["description"] == "details here"
    assert task["priority"] == 2
    assert task["skills"] == ["web", "triage"]
    assert task["source"] == "script"
    assert task["source_key"] == "k-child"
    assert task["dedup"] == "ever"
    assert task["parent_id"] == parent
    assert task["depends_on"] == [dep]
    assert task["max_retries"] == 5
    assert task["status"] == "pending"
    assert str(task["scheduled_for"]) > str(task["created_at"])
    at = add(vigil, "at a time", "--at", "2030-01-02T03:04:05Z")
    assert show(vigil, at)["scheduled_for"] == "2030-01-02T03:04:05Z"


def test_show_json_has_the_contract_fields(vigil: VigilRunner) -> None:
    task = show(vigil, add(vigil, "fields"))
    for name in (
        "id",
        "subject",
        "description",
        "status",
        "priority",
        "source",
        "source_key",
        "skills",
        "scheduled_for",
        "created_at",
        "started_at",
        "completed_at",
        "attempt_count",
        "max_retries",
        "cost_usd",
        "api_cost_usd",
        "tokens_in",
        "tokens_out",
        "result_summary",
    ):
        assert name in task, name
    assert str(task["created_at"]).endswith("Z")
    assert task["events"] == [
        {"at": task["created_at"], "actor": "human", "kind": "created", "from": None, "to": "pending"}
    ]


def test_show_text_lists_runs_and_notes(home: Path, vigil: VigilRunner) -> None:
    task_id = add(vigil, "visible")
    vigil("task", "note", str(task_id), "first note", check=True)
    claim_and_finish(home, Outcome(OutcomeKind.SUCCESS, summary="done well", cost_usd=0.25))
    text = vigil("task", "show", str(task_id), check=True).stdout
    assert "visible" in text
    assert "first note" in text
    assert "#1 success cost=$0.2500" in text


def test_list_is_in_dispatch_order_and_filters(vigil: VigilRunner) -> None:
    low = add(vigil, "low", "-p", "8")
    urgent = add(vigil, "urgent", "-p", "1")
    later = add(vigil, "later", "-p", "1", "--in", "1h")
    rows = json.loads(vigil("task", "list", "--json", check=True).stdout)["tasks"]
    assert [r["id"] for r in rows] == [urgent, low, later]
    text = vigil("task", "list", check=True).stdout
    assert text.index("urgent") < text.index("low") < text.index("later")
    vigil("task", "cancel", str(low), check=True)
    canceled = json.loads(vigil("task", "list", "--status", "canceled", "--json", check=True).stdout)["tasks"]
    assert [r["id"] for r in canceled] == [low]
    limited = json.loads(vigil("task", "list", "--limit", "1", "--json", check=True).stdout)
    assert (len(limited["tasks"]), limited["total"], limited["more"]) == (1, 2, 1)


def test_prio_defer_note(vigil: VigilRunner) -> None:
    task_id = add(vigil, "steer me")
    assert vigil("task", "prio", str(task_id), "1", check=True).stdout.strip() == f"task #{task_id} priority 1"
    assert show(vigil, task_id)["priority"] == 1
    out = vigil("task", "defer", str(task_id), "2031-05-06T07:08:09Z", check=True).stdout
    assert "2031-05-06T07:08:09Z" in out
    vigil("task", "defer", str(task_id), "90m", check=True)
    assert show(vigil, task_id)["scheduled_for"] != "2031-05-06T07:08:09Z"
    vigil("task", "note", str(task_id), "looked at it", check=True)
    notes = show(vigil, task_id)["notes"]
    assert isinstance(notes, list)
    assert notes == [{"at": notes[0]["at"], "author": "human", "text": "looked at it"}]


def test_cancel_pending_and_active(home: Path, vigil: VigilRunner) -> None:
    pending = add(vigil, "pending one", "-p", "9")
    active = add(vigil, "active one", "-p", "1")
    assert claim_and_finish(home, None) == active
    out = vigil("task", "cancel", str(active), check=True).stdout
    assert "cancel requested" in out
    task = show(vigil, active)
    assert task["status"] == "active"
    assert task["cancel_requested"] is True
    vigil("task", "cancel", str(pending), check=True)
    assert show(vigil, pending)["status"] == "canceled"


def test_retry_resets_and_keeps_history(home: Path, vigil: VigilRunner) -> None:
    task_id = add(vigil, "will fail")
    claim_and_finish(home, Outcome(OutcomeKind.FAILED, summary="broke", error="boom"))
    assert show(vigil, task_id)["status"] == "failed"
    vigil("task", "retry", str(task_id), check=True)
    task = show(vigil, task_id)
    assert task["status"] == "pending"
    assert task["attempt_count"] == 0
    runs, events = task["runs"], task["events"]
    assert isinstance(runs, list)
    assert isinstance(events, list)
    assert len(runs) == 1
    kinds = [(e["from"], e["to"]) for e in events if e["kind"] == "status"]
    assert kinds == [("pending", "active"), ("active", "failed"), ("failed", "pending")]


def test_close_by_the_agent(vigil: VigilRunner) -> None:
    task_id = add(vigil, "agent closes")
    out = vigil(
        "task",
        "close",
        str(task_id),
        "--status",
        "completed",
        "--summary",
        "all done",
        env={"VIGIL_TASK_ID": str(task_id)},
        check=True,
    ).stdout
    assert out.strip() == f"task #{task_id} completed"
    task = show(vigil, task_id)
    assert task["result_summary"] == "all done"
    events = task["events"]
    assert isinstance(events, list)
    assert events[-1]["actor"] == "agent"


def test_follow_up_from_inside_a_run_records_provenance(vigil: VigilRunner) -> None:
    parent = add(vigil, "parent")
    child = json.loads(
        vigil(
            "task",
            "add",
            "follow-up",
            "--parent",
            str(parent),
            "--json",
            env={"VIGIL_TASK_ID": str(parent)},
            check=True,
        ).stdout
    )["task"]
    assert child["source"] == f"task:{parent}"
    assert child["parent_id"] == parent


def test_stats_groups_costs(home: Path, vigil: VigilRunner) -> None:
    make_skills(home, "web")
    add(vigil, "costly", "--skills", "web", "--source", "sensor:feed")
    claim_and_finish(home, Outcome(OutcomeKind.SUCCESS, cost_usd=1.5, tokens_in=100, tokens_out=20, model="m1"))
    for by, key in (("day", None), ("skill", "web"), ("source", "sensor:feed"), ("model", "m1")):
        data = json.loads(vigil("stats", "--by", by, "--json", check=True).stdout)
        assert len(data["rows"]) == 1
        row = data["rows"][0]
        assert row["cost_usd"] == 1.5
        assert row["tokens_in"] == 100
        if key:
            assert row["key"] == key
    text = vigil("stats", "--by", "model", check=True).stdout
    assert "m1" in text
    assert "1.5000" in text


def test_doctor_reports_each_check(home: Path, vigil: VigilRunner) -> None:
    add(vigil, "something")
    result = vigil("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    for what in ("versions", "home", "config", "database", "executor", "skills"):
        assert any(line.split()[1:2] == [what] for line in result.stdout.splitlines()), what
    assert "integrity ok" in result.stdout


def test_backup_writes_a_consistent_copy(home: Path, tmp_path: Path, vigil: VigilRunner) -> None:
    add(vigil, "keep me")
    target = tmp_path / "copy.db"
    vigil("backup", str(target), check=True)
    rows = sqlite3.connect(target).execute("SELECT subject FROM tasks").fetchall()
    assert rows == [("keep me",)]
    again = vigil("backup", str(target))
    assert again.returncode == 2
    assert "already exists" in again.stderr


def test_python_dash_m_and_help(vigil: VigilRunner) -> None:
    result = vigil("--help", check=True)
    for command in ("init", "task", "stats", "doctor", "backup"):
        assert command in result.stdout


def test_add_with_a_workdir_stores_it_absolute_and_refuses_a_missing_one(tmp_path: Path, vigil: VigilRunner) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    added = vigil("task", "add", "in the repo", "--workdir", str(repo), "--json", check=True)
    assert json.loads(added.stdout)["task"]["workdir"] == str(repo.resolve())
    missing = vigil("task", "add", "nowhere", "--workdir", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith("no such folder")
    assert len(missing.stderr.strip().splitlines()) == 1


def test_doctor_says_what_status_says_about_the_loop(home: Path, vigil: VigilRunner) -> None:
    """Not 'ok loop running' when no dispatcher runs: the one truth of vigil.liveness."""
    add(vigil, "something")
    lines = {line.split()[1]: line for line in vigil("doctor").stdout.splitlines()}
    assert lines["loop"] == "ok    loop       not started: no vigil run has run on this home yet"
    now = int(time.time() * 1000)
    # stopped 10 minutes ago: both commands say "10m ago", whatever second each runs in
    ago = now - 10 * 60_000 - 20_000
    beat = {"owner": "vm:42:x", "pid": 42, "host": "vm", "since": ago - 60_000, "heartbeat_at": ago, "state": "stopped"}
    beat |= {"task_id": None, "task_started_at": None}
    conn = sqlite3.connect(home / "data" / "vigil.db")
    with conn:
        conn.execute("INSERT INTO loop_state (key, value) VALUES ('dispatcher', ?)", (json.dumps(beat),))
    conn.close()
    doctor = {line.split()[1]: line for line in vigil("doctor").stdout.splitlines()}["loop"]
    status = vigil("status", check=True).stdout.splitlines()[0]
    assert doctor.startswith("ok    loop       stopped cleanly ")
    assert doctor.endswith("stopped cleanly 10m ago (pid 42 on vm)")
    assert status == "loop: " + doctor.split(None, 2)[2]  # the same words
