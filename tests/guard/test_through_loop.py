"""The guardrails through the real dispatcher: the fake Claude Code CLI for usage
limits, auth failures and repeated failures; the manual clock for reset times; the
recording alert hook for the events."""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dispatch.alerts import AlertHook
from dispatch.executors import Executor, RunContext, build_executor
from dispatch.executors.fake import FakeExecutor
from dispatch.guard import SENSOR_RECHECK_MS, Guard
from dispatch.loop import Dispatcher
from tests.dispatch.agent_support import CLAUDE_FAKE, fake_argv
from tests.dispatch.conftest import succeeds_setting
from tests.guard.support import RECORDER, recorded, spend
from vigil.clock import MS_PER_DAY, ManualClock
from vigil.config import AgentCliSettings, BudgetSettings, Settings, load_settings
from vigil.gate import GateState, read_gate, resume
from vigil.models import NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store.sqlite import SqliteStore

NOW_MS = 1_767_100_000_000  # before the fake CLI's reset time
RESET_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the reset the fake CLI reports
WORKER = "guard-test:1:abc"
SAFETY_S = 10  # a safety net against a hung loop, not a measurement


@pytest.fixture
def settings(home: Path, tmp_path: Path) -> Settings:
    base = load_settings(home)
    return replace(
        base,
        dispatch=replace(base.dispatch, executor="claude", heartbeat_ms=50, retry_backoff_ms=10_000),
        alerts=replace(base.alerts, command=(sys.executable, str(RECORDER), str(tmp_path / "events.jsonl"))),
        limits=replace(base.limits, max_consecutive_failures=2),
    )


@pytest.fixture
async def db(settings: Settings, clock: ManualClock) -> AsyncIterator[SqliteStore]:
    clock.set(NOW_MS)
    store = await SqliteStore.open(settings.store.path, clock=clock, limits=settings.limits)
    yield store
    await store.close()


@pytest.fixture
async def hook(settings: Settings) -> AsyncIterator[AlertHook]:
    alerts = AlertHook(settings.alerts, settings.home)
    yield alerts
    await alerts.drain()


def _claude(settings: Settings, scenario: str) -> Executor:
    fake = replace(settings, claude=AgentCliSettings(tuple(fake_argv(CLAUDE_FAKE, scenario))))
    return build_executor("claude", fake, grace_s=0.5)


def _dispatcher(
    db: Any, settings: Settings, clock: ManualClock, hook: AlertHook, executors: dict[str, Executor]
) -> Dispatcher:
    """A guarded dispatcher whose executor is ``executors["now"]`` (tests swap it)."""
    guard = Guard(db, settings, clock, hook)
    return Dispatcher(db, settings, lambda name: executors["now"], clock, WORKER, guard=guard, rng=random.Random(3))


async def test_a_usage_limit_gates_the_loop_until_the_reset_then_it_goes_on(
    db: SqliteStore, settings: Settings, clock: ManualClock, hook: AlertHook, tmp_path: Path
) -> None:
    limited = await db.add_task(NewTask("hits the limit", priority=1))
    other = await db.add_task(NewTask("waits its turn", priority=2))
    executors = {"now": _claude(settings, "usage_limit")}
    dispatcher = _dispatcher(db, settings, clock, hook, executors)

    first = await dispatcher.run_once()
    assert first is not None
    # due at once, its attempt given back: only the account waits for the reset
    assert (first.id, first.status, first.scheduled_for) == (limited.task_id, TaskStatus.PENDING, NOW_MS)
    gate = await read_gate(db)
    assert (gate.state, gate.until) == (GateState.GATED, RESET_MS)

    clock.set(RESET_MS - 1)
    assert await dispatcher.run_once() is None  # gated: the other task is due but not claimed
    assert len(await db.list_runs(other.task_id or 0)) == 0

    clock.set(RESET_MS)
    executors["now"] = _claude(settings, "success")
    ran = [await dispatcher.run_once(), await dispatcher.run_once()]
    assert [(t.id, t.status) for t in ran if t is not None] == [
        (limited.task_id, TaskStatus.COMPLETED),
        (other.task_id, TaskStatus.COMPLETED),
    ]
    await hook.drain()
    gate_events = [(e["state"], e.get("until")) for e in recorded(tmp_path / "events.jsonl")]
    assert gate_events == [("gated", RESET_MS), ("running", None)]


async def test_an_auth_failure_gates_until_resumed_and_alerts(
    db: SqliteStore, settings: Settings, clock: ManualClock, hook: AlertHook, tmp_path: Path
) -> None:
    await db.add_task(NewTask("first", priority=1))
    second = await db.add_task(NewTask("second", priority=2))
    executors = {"now": _claude(settings, "auth")}
    dispatcher = _dispatcher(db, settings, clock, hook, executors)

    first = await dispatcher.run_once()
    assert first is not None
    assert first.status is TaskStatus.PENDING  # given back: the key is at fault, not the task
    clock.advance(7 * 24 * 3_600_000)
    assert await dispatcher.run_once() is None  # no reset time: a person must act

    await resume(db, by="human", now_ms=clock.now_ms())
    executors["now"] = _claude(settings, "success")
    again = await dispatcher.run_once()
    done = await dispatcher.run_once()
    assert again is not None
    assert (again.id, again.status, again.attempt_count) == (first.id, TaskStatus.COMPLETED, 1)
    assert done is not None
    assert (done.id, done.status) == (second.task_id, TaskStatus.COMPLETED)
    await hook.drain()
    kinds = [e["event"] for e in recorded(tmp_path / "events.jsonl")]
    assert kinds == ["auth_failed", "gate_changed"]


async def test_repeated_failures_gate_the_loop(
    db: SqliteStore, settings: Settings, clock: ManualClock, hook: AlertHook
) -> None:
    for n in range(3):
        await db.add_task(NewTask(f"doomed {n}", max_retries=0))
    executors = {"now": _claude(settings, "max_turns")}
    dispatcher = _dispatcher(db, settings, clock, hook, executors)

    statuses = [await dispatcher.run_once() for _ in range(3)]
    assert [t.status if t else None for t in statuses] == [TaskStatus.FAILED, TaskStatus.FAILED, None]
    gate = await read_gate(db)
    assert (gate.state, gate.until) == (GateState.GATED, None)
    assert "2 failed runs in a row" in gate.reason


class CountingStore:
    """Passes every call to the real store and counts the claims."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if callable(attr):
            self.calls[name] += 1
        return attr


async def test_over_budget_only_urgent_work_runs_and_the_loop_does_not_spin(
    db: SqliteStore, settings: Settings, clock: ManualClock, hook: AlertHook
) -> None:
    settings = replace(settings, budget=BudgetSettings(daily_usd=1.0, urgent_priority=2, warn_at=()))
    await spend(db, 1.0)
    routine = await db.add_task(NewTask("routine", priority=5))
    urgent = await db.add_task(NewTask("urgent", priority=2))
    done = asyncio.Event()
    fake = FakeExecutor(succeeds_setting(done))
    counting = CountingStore(db)
    dispatcher = _dispatcher(counting, settings, clock, hook, {"now": fake})

    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.wait_for(done.wait(), SAFETY_S)
    await asyncio.sleep(0.5)  # idle with a due routine task it may not run
    stop.set()
    await asyncio.wait_for(loop_task, SAFETY_S)

    assert [t.id for t, _ in fake.calls] == [urgent.task_id]
    assert (await db.get_task(routine.task_id or 0)).status is TaskStatus.PENDING
    # Nothing changed while idle, so it must not have asked again and again.
    assert counting.calls["claim_next"] <= 4


async def test_a_task_requiring_approval_never_runs_before_it(
    db: SqliteStore, settings: Settings, clock: ManualClock, hook: AlertHook
) -> None:
    added = await db.add_task(NewTask("wipe the staging bucket", requires_approval=True))
    done = asyncio.Event()
    fake = FakeExecutor(succeeds_setting(done))
    dispatcher = _dispatcher(db, settings, clock, hook, {"now": fake})

    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.sleep(0.3)
    assert fake.calls == []
    person = await SqliteStore.open(settings.store.path, clock=clock)  # another process, as the CLI would be
    try:
        await person.approve(added.task_id or 0, actor="human")
    finally:
        await person.close()
    await asyncio.wait_for(done.wait(), SAFETY_S)
    stop.set()
    await asyncio.wait_for(loop_task, SAFETY_S)
    assert [t.id for t, _ in fake.calls] == [added.task_id]
    assert (await db.get_task(added.task_id or 0)).status is TaskStatus.COMPLETED


async def test_a_sensor_over_its_budget_waits_while_other_work_runs(
    db: SqliteStore, settings: Settings, clock: ManualClock, hook: AlertHook, tmp_path: Path
) -> None:
    settings = replace(settings, budget=BudgetSettings(urgent_priority=1, warn_at=(), per_sensor={"feeds": 1.0}))
    root = await db.add_task(NewTask("feed entry", source="sensor:feeds", priority=3))
    ran: list[str] = []

    def handler(task: Task, ctx: RunContext) -> Outcome:
        ran.append(task.subject)
        return Outcome(OutcomeKind.SUCCESS, cost_usd=0.6)

    dispatcher = _dispatcher(db, settings, clock, hook, {"now": FakeExecutor(handler)})
    assert await dispatcher.run_once() is not None  # $0.60 of $1.00: under the cap
    follow_up = await db.add_task(NewTask("follow-up", source=f"task:{root.task_id}", parent_id=root.task_id))
    assert await dispatcher.run_once() is not None  # $1.20: the follow-up counted for feeds
    feeds = await db.add_task(NewTask("next entry", source="sensor:feeds", priority=2))
    deeper = await db.add_task(NewTask("deeper", source=f"task:{follow_up.task_id}", parent_id=follow_up.task_id))
    urgent = await db.add_task(NewTask("feed says the site is down", source="sensor:feeds", priority=1))
    by_hand = await db.add_task(NewTask("by hand", priority=4))

    for _ in range(4):
        await dispatcher.run_once()
    assert ran == ["feed entry", "follow-up", "feed says the site is down", "by hand"]
    for waiting in (feeds, deeper):
        task = await db.get_task(waiting.task_id or 0)
        assert (task.status, task.attempt_count) == (TaskStatus.PENDING, 0)
        assert task.scheduled_for == clock.now_ms() + SENSOR_RECHECK_MS
        assert await db.list_runs(task.id) == []
    assert (await db.get_task(urgent.task_id or 0)).status is TaskStatus.COMPLETED
    assert (await db.get_task(by_hand.task_id or 0)).status is TaskStatus.COMPLETED
    await hook.drain()
    [warning] = recorded(tmp_path / "events.jsonl")  # two tasks deferred, one alert
    assert (warning["event"], warning["sensor"], warning["cap_usd"]) == ("budget_warning", "feeds", 1.0)

    clock.advance(MS_PER_DAY + 1)  # the feeds spend has left the window
    assert await dispatcher.run_once() is not None
    assert await dispatcher.run_once() is not None
    assert sorted(ran[4:]) == ["deeper", "next entry"]
