"""The rolling-24 h budget: warnings once per threshold per window, and above the cap
only urgent tasks are claimed."""

from __future__ import annotations

from pathlib import Path

from tests.guard.conftest import GuardFactory
from tests.guard.support import guard_settings, recorded, spend
from vigil.budget import budget_use
from vigil.clock import MS_PER_DAY, ManualClock
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore

HOUR = 3_600_000
BUDGET = {"daily_usd": 10.0, "urgent_priority": 2, "warn_at": [0.5, 0.8, 1.0]}


async def test_warnings_fire_once_per_threshold_per_window(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    guard, hook = make_guard(guard_settings(tmp_path, events, budget=BUDGET))

    async def warnings_after(usd: float) -> list[float]:
        if usd:
            await spend(store, usd)
        await guard.may_claim(clock.now_ms())
        await hook.drain()
        fired = [e["threshold"] for e in recorded(events) if e["event"] == "budget_warning"]
        events.unlink(missing_ok=True)
        return fired

    assert await warnings_after(4.0) == []
    assert await warnings_after(1.0) == [0.5]  # $5 of $10
    assert await warnings_after(0.0) == []  # asked again: no repeat
    assert await warnings_after(1.0) == []  # $6: still only past 50 %
    assert await warnings_after(4.5) == [0.8, 1.0]  # $10.50: both at once
    clock.advance(HOUR)
    assert await warnings_after(1.0) == []  # still the same window
    clock.advance(MS_PER_DAY + 1)  # every run has left the window and every warning has aged out
    assert await warnings_after(0.0) == []  # nothing spent: nothing to warn about
    assert await warnings_after(6.0) == [0.5]  # a new window warns again


async def test_a_warning_event_says_how_much_was_spent(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    guard, hook = make_guard(guard_settings(tmp_path, events, budget={"daily_usd": 2.0, "warn_at": [1.0]}))
    await spend(store, 2.5)
    await guard.may_claim(clock.now_ms())
    await hook.drain()
    [event] = recorded(events)
    assert (event["event"], event["threshold"], event["spent_usd"], event["cap_usd"]) == (
        "budget_warning",
        1.0,
        2.5,
        2.0,
    )
    assert "$2.50 of $2.00" in event["message"]


async def test_above_the_cap_only_urgent_tasks_are_claimed(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    guard, _ = make_guard(guard_settings(tmp_path, tmp_path / "e", budget=BUDGET))
    await spend(store, 9.99)
    decision = await guard.may_claim(clock.now_ms())
    assert (decision.may_claim, decision.max_priority) == (True, None)  # under the cap: anything

    await spend(store, 0.01)
    routine = await store.add_task(NewTask("routine report", priority=5))
    urgent = await store.add_task(NewTask("disk almost full", priority=2))
    decision = await guard.may_claim(clock.now_ms())
    assert (decision.may_claim, decision.max_priority) == (True, 2)
    assert "over budget" in decision.reason
    claim = await store.claim_next(worker="w", lease_ms=60_000, max_priority=decision.max_priority)
    assert claim is not None
    assert claim.task.id == urgent.task_id
    assert await store.claim_next(worker="w", lease_ms=60_000, max_priority=decision.max_priority) is None

    clock.advance(MS_PER_DAY + 1)  # the spend leaves the rolling window
    decision = await guard.may_claim(clock.now_ms())
    assert decision.max_priority is None
    claim = await store.claim_next(worker="w", lease_ms=60_000, max_priority=decision.max_priority)
    assert claim is not None
    assert claim.task.id == routine.task_id


async def test_without_a_cap_there_is_no_budget_gate(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    guard, hook = make_guard(guard_settings(tmp_path, events))
    await spend(store, 1000.0)
    decision = await guard.may_claim(clock.now_ms())
    assert (decision.may_claim, decision.max_priority) == (True, None)
    await hook.drain()
    assert recorded(events) == []
    use = await budget_use(store, guard_settings(tmp_path, events).budget, clock.now_ms())
    assert (use.spent_usd, use.cap_usd, use.fraction, use.over) == (1000.0, None, None, False)
