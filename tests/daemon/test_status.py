"""`vigil status`: the loop's one truth (vigil.liveness), current task, queue, sensors."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import pytest

from dispatch.standby import StandbyNotice
from dispatch.worker_ids import this_host
from tests.conftest import VigilRunner
from vigil.accounts import limit_account, when_text
from vigil.clock import ManualClock, iso_utc
from vigil.config import Account, Settings, load_settings
from vigil.gate import pause, resume, trip
from vigil.liveness import STANDBY_KEY
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat, NewTask, SensorRun
from vigil.status import gather_status, render_status
from vigil.store.sqlite import SqliteStore

T = TypeVar("T")


@pytest.fixture
def settings(home: Path) -> Settings:
    return load_settings(home)  # heartbeat 15 s: a heartbeat older than 45 s means gone


@pytest.fixture
async def db(settings: Settings, clock: ManualClock) -> AsyncIterator[SqliteStore]:
    store = await SqliteStore.open(settings.store.path, clock=clock)
    yield store
    await store.close()


async def beat(
    db: SqliteStore, clock: ManualClock, state: str, task_id: int | None = None, note: str | None = None
) -> None:
    value = DispatcherHeartbeat(
        owner="vm:42:abc",
        pid=42,
        host="vm",
        since=clock.now_ms() - 3_600_000,
        heartbeat_at=clock.now_ms(),
        state=state,
        task_id=task_id,
        task_started_at=None if task_id is None else clock.now_ms() - 125_000,
        note=note,
    )
    await db.set_loop_values({HEARTBEAT_KEY: value.to_json()})


async def test_no_dispatcher_ever(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    status = await gather_status(db, settings, clock.now_ms())

    assert status["dispatcher"] == {"alive": False, "seen": False, "task": None}
    assert render_status(status).splitlines()[0] == "loop: not started: no vigil run has run on this home yet"


async def test_a_running_dispatcher_and_its_task(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    added = await db.add_task(NewTask("summarise the feed"))
    claimed_at = clock.now_ms()
    claim = await db.claim_next(worker="vm:42:abc", lease_ms=60_000)
    assert claim is not None
    await db.add_task(NewTask("later", scheduled_for=clock.now_ms() + 600_000))
    clock.advance(125_000)
    await beat(db, clock, "running", task_id=None)  # a throttled beat: the task is found by its claim
    clock.advance(10_000)

    status = await gather_status(db, settings, clock.now_ms())

    d = status["dispatcher"]
    assert isinstance(d, dict)
    assert (d["alive"], d["state"], d["pid"], d["heartbeat_age_s"]) == (True, "running", 42, 10)
    assert d["task"] == {
        "id": added.task_id,
        "subject": "summarise the feed",
        "started_at": iso_utc(claimed_at),
        "elapsed_s": 135,
        "note": None,
    }
    q = status["queue"]
    assert isinstance(q, dict)
    assert (q["pending"], q["active"], q["completed"]) == (1, 1, 0)
    assert q["next_due_in_s"] == 600 - 135
    text = render_status(status)
    assert text.splitlines()[0] == "loop: running (pid 42 on vm, heartbeat 10s ago)"
    assert f"running task #{added.task_id} for 2m: summarise the feed" in text
    assert "1 pending, 1 active" in text
    assert "due in 7m" in text


async def test_a_silent_dispatcher_is_reported_down(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    await beat(db, clock, "idle")
    clock.advance(12 * 60_000)

    status = await gather_status(db, settings, clock.now_ms())

    d = status["dispatcher"]
    assert isinstance(d, dict)
    assert (d["alive"], d["seen"], d["heartbeat_age_s"], d["task"]) == (False, True, 720, None)
    assert render_status(status).splitlines()[0] == (
        "loop: DIED: no heartbeat for 12m (last: pid 42 on vm, idle); start vigil run again"
    )
    assert status["loop"] == {"state": "died", "summary": render_status(status).splitlines()[0][6:], "standby": []}


async def test_a_heartbeat_within_three_intervals_is_alive(
    db: SqliteStore, settings: Settings, clock: ManualClock
) -> None:
    await beat(db, clock, "idle")
    clock.advance(3 * settings.dispatch.heartbeat_ms)
    alive = await gather_status(db, settings, clock.now_ms())
    clock.advance(1)
    gone = await gather_status(db, settings, clock.now_ms())

    alive_dispatcher, gone_dispatcher = alive["dispatcher"], gone["dispatcher"]
    assert isinstance(alive_dispatcher, dict)
    assert isinstance(gone_dispatcher, dict)
    assert alive_dispatcher["alive"] is True
    assert gone_dispatcher["alive"] is False


async def test_a_clean_stop_is_not_alive_nor_down(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    await beat(db, clock, "stopped")

    status = await gather_status(db, settings, clock.now_ms())

    dispatcher = status["dispatcher"]
    assert isinstance(dispatcher, dict)
    assert dispatcher["alive"] is False
    assert render_status(status).splitlines()[0] == "loop: stopped cleanly 0s ago (pid 42 on vm)"


async def test_sensor_health(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    now = clock.now_ms()
    await db.record_sensor_run("feeds", SensorRun(started_at=now, duration_ms=20, status="ok"), [], None)
    failed = SensorRun(
        started_at=now, duration_ms=5, status="error", error="connection refused\nmore", consecutive_failures=3
    )
    await db.record_sensor_run("inbox", failed, [], None)

    await db.record_sensor_run("removed", SensorRun(started_at=now, duration_ms=5, status="ok"), [], None)
    configured = ({"name": "feeds", "use": "feed"}, {"use": "inbox"})  # "removed" is no longer in vigil.toml
    status = await gather_status(db, replace(settings, sensors=configured), now)

    sensors = status["sensors"]
    assert isinstance(sensors, list)
    assert [(s["name"], s["healthy"], s["consecutive_failures"]) for s in sensors] == [
        ("feeds", True, 0),
        ("inbox", False, 3),
    ]
    text = render_status(status)
    assert "feeds  ok" in text
    assert "inbox  error" in text
    assert "3 failure(s) in a row: connection refused" in text


@pytest.mark.slow
def test_status_cli_json_and_text(vigil: VigilRunner, home: Path) -> None:
    vigil("task", "add", "one", check=True)

    as_json = json.loads(vigil("status", "--json", check=True).stdout)
    text = vigil("status", check=True).stdout

    assert set(as_json) == {
        "now",
        "loop",
        "dispatcher",
        "gate",
        "accounts",
        "budget",
        "rejected_inserts",
        "queue",
        "attention",
        "questions",
        "notifiers_failing",
        "chat",
        "sensors",
        "store",
    }
    assert as_json["chat"] is None  # no [chat.telegram]
    assert as_json["attention"] == {"awaiting_review": 0, "awaiting_approval": 0, "denied_runs_24h": 0}
    assert as_json["accounts"] == []  # a dry-run home runs no agent CLI
    assert (as_json["questions"], as_json["notifiers_failing"], as_json["queue"]["waiting"]) == ([], [], 0)
    database = str((home / "data" / "vigil.db").resolve())
    assert as_json["store"] == {"backend": "sqlite", "at": database}
    assert f"store: sqlite at {database}" in text
    assert as_json["queue"]["pending"] == 1
    assert as_json["queue"]["next_due_in_s"] == 0
    assert "queue: 1 pending" in text
    assert "due now" in text


async def test_the_agents_live_note_is_shown_with_its_task(
    db: SqliteStore, settings: Settings, clock: ManualClock
) -> None:
    added = await db.add_task(NewTask("summarise the feed"))
    claim = await db.claim_next(worker="vm:42:abc", lease_ms=60_000)
    assert claim is not None
    await beat(db, clock, "running", task_id=added.task_id, note="API retry 2/10, next in 4 s (529 overloaded)")

    status = await gather_status(db, settings, clock.now_ms())

    d = status["dispatcher"]
    assert isinstance(d, dict)
    assert isinstance(d["task"], dict)
    assert d["task"]["note"] == "API retry 2/10, next in 4 s (529 overloaded)"
    assert "  agent: API retry 2/10, next in 4 s (529 overloaded)" in render_status(status).splitlines()


async def test_every_account_is_shown_with_its_state_and_reset(db: SqliteStore, home: Path, clock: ManualClock) -> None:
    base = load_settings(home)
    accounts = (Account("a", config_dir=home / "a"), Account("b", api_key_env="KEY_B"))
    settings = replace(
        base, dispatch=replace(base.dispatch, executor="claude"), claude=replace(base.claude, accounts=accounts)
    )
    now = clock.now_ms()
    await limit_account(
        db, "claude:b", until=now + 2 * 3_600_000, reason="usage limit: session", now_ms=now, in_a_row=1
    )

    status = await gather_status(db, settings, now)

    shown = status["accounts"]
    assert isinstance(shown, list)
    assert [(a["account"], a["state"], a["until_in_s"]) for a in shown] == [("a", "free", None), ("b", "limited", 7200)]
    lines = render_status(status).splitlines()
    at = lines.index("accounts:")
    assert lines[at + 1 : at + 3] == [
        "  claude:a free",
        f"  claude:b limited until {when_text(now + 7_200_000, now)} (in 2h00m): usage limit: session",
    ]


async def test_one_truth_for_the_gate_and_the_process(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    """A closed gate is the condition of a live loop, and said beside a stopped one:
    never "running" under a dispatcher that is not."""
    now = clock.now_ms()

    async def first_line() -> tuple[str, str]:
        status = await gather_status(db, settings, clock.now_ms())
        loop = status["loop"]
        assert isinstance(loop, dict)
        return str(loop["state"]), render_status(status).splitlines()[0]

    await beat(db, clock, "idle")
    await pause(db, reason="disk swap", by="human", now_ms=now)
    state, line = await first_line()
    assert state == "paused"
    assert line.startswith("loop: PAUSED by human since ")
    assert line.endswith(": disk swap (vigil resume); the dispatcher (pid 42 on vm) claims nothing meanwhile")
    await trip(db, reason="usage limit", until=now + 3_600_000, by="guard", now_ms=now)
    await resume(db, by="human", now_ms=now)
    await trip(db, reason="usage limit", until=now + 3_600_000, by="guard", now_ms=now)
    state, line = await first_line()
    assert state == "backing off"
    assert "BACKING OFF: usage limit; resumes by itself at " in line
    assert "(in 1h00m)" in line
    await trip(db, reason="auth failed", until=None, by="guard", now_ms=now)
    assert (await first_line())[0] == "gated"
    await beat(db, clock, "stopped")
    state, line = await first_line()
    assert state == "stopped"
    assert line.startswith("loop: stopped cleanly 0s ago (pid 42 on vm); GATED since ")
    await resume(db, by="human", now_ms=now)
    assert await first_line() == ("stopped", "loop: stopped cleanly 0s ago (pid 42 on vm)")


async def test_a_process_standing_by_is_said(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    notice = StandbyNotice(db, clock, "vm:77:x", settings.dispatch.heartbeat_ms)
    await beat(db, clock, "stopped")
    await notice.start()
    try:
        await wait_until(db.loop_values, lambda values: STANDBY_KEY in values)
        status = await gather_status(db, settings, clock.now_ms())
        loop = status["loop"]
        assert isinstance(loop, dict)
        assert loop["state"] == "standby"
        assert loop["summary"] == f"standby: pid {os.getpid()} on {this_host()} waits for a free dispatcher lane"
        clock.advance(3 * settings.dispatch.heartbeat_ms + 1)  # silent too long: gone (a crash)
        assert (await gather_status(db, settings, clock.now_ms()))["loop"]["state"] == "stopped"  # type: ignore[index]
    finally:
        await notice.stop()
    assert (await db.loop_values())[STANDBY_KEY] == {}


async def wait_until(read: Callable[[], Awaitable[T]], ok: Callable[[T], bool]) -> T:
    for _ in range(500):
        value = await read()
        if ok(value):
            return value
        await asyncio.sleep(0.01)
    raise AssertionError("never became true")
