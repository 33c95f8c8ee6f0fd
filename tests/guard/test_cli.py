"""The guardrail commands through the CLI (in this process): pause/resume,
approve/reject, flood limits as one-line errors, the alert hook commands."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import VigilRunner
from tests.guard.support import RECORDER, recorded
from vigil.clock import SystemClock
from vigil.gate import GateState, LoopGate, trip
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat, NewTask, Outcome, OutcomeKind
from vigil.store.sqlite import SqliteStore


def _loop_values(home: Path) -> dict[str, object]:
    async def read() -> dict[str, object]:
        store = await SqliteStore.open(home / "data" / "vigil.db")
        try:
            return await store.loop_values()
        finally:
            await store.close()

    return asyncio.run(read())


def _one_line_error(proc: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("vigil: error: ")
    assert text in lines[0]


def _configure(home: Path, toml: str) -> None:
    with (home / "vigil.toml").open("a", encoding="utf-8") as f:
        f.write("\n" + toml)


def test_pause_and_resume(vigil_in_process: VigilRunner, home: Path) -> None:
    paused = vigil_in_process("pause", "--reason", "upgrading the box", check=True)
    assert "loop paused: upgrading the box" in paused.stdout
    gate = LoopGate.from_json(_loop_values(home)["gate"])
    assert (gate.state, gate.reason, gate.by, gate.until) == (GateState.PAUSED, "upgrading the box", "human", None)

    resumed = vigil_in_process("resume", check=True)
    assert "loop resumed (was paused: upgrading the box)" in resumed.stdout
    assert LoopGate.from_json(_loop_values(home)["gate"]).state is GateState.RUNNING
    assert "already running" in vigil_in_process("resume", check=True).stdout


def test_an_agent_may_never_pause_resume_approve_or_reject(vigil_in_process: VigilRunner, home: Path) -> None:
    inside = {"VIGIL_TASK_ID": "7"}
    paused = vigil_in_process("pause", "--reason", "I broke something", env=inside)
    _one_line_error(paused, 2, "only a person can pause")
    assert "gate" not in _loop_values(home)  # nothing was written
    _one_line_error(vigil_in_process("resume", env=inside), 2, "only a person can resume the loop")
    vigil_in_process("task", "add", "drop the table", "--requires-approval", check=True)
    _one_line_error(vigil_in_process("task", "approve", "1", env=inside), 2, "only a person can approve a task")
    _one_line_error(vigil_in_process("task", "reject", "1", "--reason", "x", env=inside), 2, "only a person can reject")


def test_approve_and_reject(vigil_in_process: VigilRunner) -> None:
    added = vigil_in_process("task", "add", "delete old backups", "--requires-approval", check=True)
    assert "created task #1 (awaiting approval: vigil task approve 1)" in added.stdout
    shown = json.loads(vigil_in_process("task", "show", "1", "--json", check=True).stdout)
    assert (shown["status"], shown["approval"]) == ("blocked", "pending")

    assert "task #1 approved; pending" in vigil_in_process("task", "approve", "1", check=True).stdout
    _one_line_error(vigil_in_process("task", "approve", "1"), 2, "task #1 is pending and not awaiting approval")
    events = json.loads(vigil_in_process("task", "show", "1", "--json", check=True).stdout)["events"]
    assert any(e["kind"] == "approval" and e["to"] == "approved" for e in events), events

    vigil_in_process("task", "add", "rotate keys", "--requires-approval", check=True)
    _one_line_error(vigil_in_process("task", "reject", "2", "--reason", "  "), 2, "--reason must not be empty")
    assert vigil_in_process("task", "reject", "2").returncode == 2  # --reason is required
    assert (
        "task #2 rejected; canceled"
        in vigil_in_process("task", "reject", "2", "--reason", "not this week", check=True).stdout
    )
    shown = json.loads(vigil_in_process("task", "show", "2", "--json", check=True).stdout)
    assert (shown["status"], shown["approval"], shown["result_summary"]) == (
        "canceled",
        "rejected",
        "rejected: not this week",
    )
    _one_line_error(vigil_in_process("task", "approve", "99"), 2, "task #99 not found")


def test_a_flood_limit_is_a_one_line_error_and_nothing_is_added(vigil_in_process: VigilRunner, home: Path) -> None:
    _configure(home, "[limits]\nmax_children = 1\nmax_depth = 1\n")
    vigil_in_process("task", "add", "parent", check=True)
    vigil_in_process("task", "add", "child", "--parent", "1", check=True)
    _one_line_error(
        vigil_in_process("task", "add", "second child", "--parent", "1"), 1, "task #1 already has 1 follow-ups"
    )
    _one_line_error(vigil_in_process("task", "add", "grandchild", "--parent", "2"), 1, "max_depth = 1")
    listed = json.loads(vigil_in_process("task", "list", "--json", check=True).stdout)["tasks"]
    assert sorted(t["subject"] for t in listed) == ["child", "parent"]
    rejected = _loop_values(home)["rejected_inserts"]
    assert isinstance(rejected, dict)
    assert rejected["total"] == 2


def test_alerts_test_sends_an_event_and_reports_a_failing_hook(
    vigil_in_process: VigilRunner, home: Path, tmp_path: Path
) -> None:
    _one_line_error(vigil_in_process("alerts", "test"), 2, "no [alerts] command")
    events = tmp_path / "events.jsonl"
    command = json.dumps([sys.executable, str(RECORDER), str(events)])
    _configure(home, f"[alerts]\ncommand = {command}\n")
    assert "test alert sent" in vigil_in_process("alerts", "test", check=True).stdout
    [event] = recorded(events)
    assert (event["event"], event["home"], event["_env_event"]) == ("test", str(home), "test")

    failing = json.dumps([sys.executable, str(RECORDER), str(events), "fail"])
    (home / "vigil.toml").write_text((home / "vigil.toml").read_text().replace(command, failing))
    _one_line_error(vigil_in_process("alerts", "test"), 1, "exited 1: smtp: connection refused")


def test_alerts_check_reports_a_stale_dispatcher_once(
    vigil_in_process: VigilRunner, home: Path, tmp_path: Path
) -> None:
    events = tmp_path / "events.jsonl"
    command = json.dumps([sys.executable, str(RECORDER), str(events)])
    _configure(home, f'[alerts]\ncommand = {command}\nstale_dispatcher = "5m"\n')
    vigil_in_process("task", "list", check=True)  # creates the database
    old = SystemClock().now_ms() - 3_600_000
    beat = DispatcherHeartbeat("host:1:ab", 1, "host", old, old, "idle")

    async def write() -> None:
        store = await SqliteStore.open(home / "data" / "vigil.db")
        await store.set_loop_values({HEARTBEAT_KEY: beat.to_json()})
        await store.close()

    asyncio.run(write())
    first = vigil_in_process("alerts", "check", check=True)
    assert "dispatcher host:1:ab has not reported" in first.stdout
    assert vigil_in_process("alerts", "check", check=True).stdout == ""  # the same incident alerts once
    assert [e["event"] for e in recorded(events)] == ["dispatcher_stale"]


def _spend(home: Path, usd: float, source: str = "sensor:feeds") -> None:
    async def run() -> None:
        store = await SqliteStore.open(home / "data" / "vigil.db")
        try:
            await store.add_task(NewTask("paid work", source=source))
            claim = await store.claim_next(worker="w", lease_ms=60_000)
            assert claim is not None
            outcome = Outcome(OutcomeKind.SUCCESS, cost_usd=usd)
            await store.record(claim, outcome, worker="w")
        finally:
            await store.close()

    asyncio.run(run())


def test_stats_by_sensor_with_the_budget_line(vigil_in_process: VigilRunner, home: Path) -> None:
    vigil_in_process("task", "list", check=True)  # creates the database
    _spend(home, 3.0)
    assert "budget" not in vigil_in_process("stats", check=True).stdout  # no cap configured
    _configure(home, "[budget]\ndaily_usd = 4.0\n")
    text = vigil_in_process("stats", "--by", "sensor", check=True).stdout
    assert "feeds" in text
    assert text.strip().splitlines()[-1] == "budget: $3.00 of $4.00 in the last 24 h (75%)"
    _spend(home, 1.5)
    report = json.loads(vigil_in_process("stats", "--by", "sensor", "--json", check=True).stdout)
    assert report["budget"] == {"spent_usd": 4.5, "cap_usd": 4.0, "fraction": 1.125, "over": True}
    assert [(r["key"], r["cost_usd"]) for r in report["rows"]] == [("feeds", 4.5)]
    assert "over the cap: only urgent tasks run" in vigil_in_process("stats", check=True).stdout


def test_a_task_the_agent_adds_is_a_follow_up_of_its_task(vigil_in_process: VigilRunner, home: Path) -> None:
    _configure(home, "[limits]\nmax_children = 1\n")
    vigil_in_process("task", "add", "the agent's task", check=True)
    inside = {"VIGIL_TASK_ID": "1"}
    vigil_in_process("task", "add", "a follow-up", env=inside, check=True)
    shown = json.loads(vigil_in_process("task", "show", "2", "--json", check=True).stdout)
    assert (shown["parent_id"], shown["source"]) == (1, "task:1")
    _one_line_error(vigil_in_process("task", "add", "another", env=inside), 1, "task #1 already has 1 follow-ups")


def test_status_shows_the_gate_the_budget_and_refusals(vigil_in_process: VigilRunner, home: Path) -> None:
    _configure(home, "[budget]\ndaily_usd = 2.0\n[limits]\nmax_children = 1\n")
    vigil_in_process("task", "add", "parent", check=True)
    vigil_in_process("task", "add", "child", "--parent", "1", check=True)
    vigil_in_process("task", "add", "child 2", "--parent", "1")
    assert "loop: not started: no vigil run has run on this home yet\n" in vigil_in_process("status", check=True).stdout

    vigil_in_process("pause", "--reason", "disk swap", check=True)
    _spend(home, 2.5)
    text = vigil_in_process("status", check=True).stdout
    assert "loop: not started: no vigil run has run on this home yet; PAUSED by human since " in text
    assert "disk swap (vigil resume)" in text
    assert "budget: $2.50 of $2.00 in the last 24 h (125%); over the cap: only urgent tasks run" in text
    assert "flood limits: 1 task(s) refused so far (last: human: task #1 already has 1 follow-ups" in text

    report = json.loads(vigil_in_process("status", "--json", check=True).stdout)
    assert (report["gate"]["state"], report["gate"]["reason"], report["gate"]["until"]) == ("paused", "disk swap", None)
    assert report["budget"] == {"spent_usd": 2.5, "cap_usd": 2.0, "fraction": 1.25, "over": True}
    assert report["rejected_inserts"]["total"] == 1


def test_status_shows_when_a_gate_lifts_itself(vigil_in_process: VigilRunner, home: Path) -> None:
    vigil_in_process("task", "list", check=True)  # creates the database

    async def gate() -> None:
        store = await SqliteStore.open(home / "data" / "vigil.db")
        now = SystemClock().now_ms()
        await trip(store, reason="usage limit (resets soon)", until=now + 2 * 3_600_000, by="guard", now_ms=now)
        await store.close()

    asyncio.run(gate())
    text = vigil_in_process("status", check=True).stdout
    assert "; BACKING OFF: usage limit (resets soon); resumes by itself at " in text
    assert "(in 1h59m)" in text or "(in 2h00m)" in text
