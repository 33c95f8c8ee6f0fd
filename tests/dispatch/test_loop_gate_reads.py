"""The guard's gate is read once for a run of back-to-back tasks, not once per task,
and yet a pause another process commits while a task runs stops the next claim."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from dispatch.alerts import AlertHook
from dispatch.executors import RunContext
from dispatch.executors.fake import FakeExecutor
from dispatch.guard import Guard
from dispatch.loop import Dispatcher
from tests.dispatch.conftest import WORKER
from tests.dispatch.test_loop_chain_and_guard import SAFETY_S, CountingStore, run_until_idle
from vigil.clock import ManualClock
from vigil.config import Settings
from vigil.gate import pause, read_gate
from vigil.models import NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store.sqlite import SqliteStore


@pytest.fixture
async def alerts(settings: Settings) -> AsyncIterator[AlertHook]:
    hook = AlertHook(settings.alerts, settings.home)
    yield hook
    await hook.drain()


async def test_back_to_back_tasks_read_the_gate_once(
    db: SqliteStore, settings: Settings, clock: ManualClock, alerts: AlertHook
) -> None:
    for n in range(5):
        await db.add_task(NewTask(f"t{n}"))
    counting = CountingStore(db)
    guard = Guard(counting, settings, clock, alerts)
    done = asyncio.Event()
    reads_seen: list[int] = []  # gate reads made before each task ran

    def handler(task: Task, ctx: RunContext) -> Outcome:
        reads_seen.append(counting.calls["versioned_loop_values"])
        if len(reads_seen) == 5:
            done.set()
        return Outcome(OutcomeKind.SUCCESS)

    dispatcher = Dispatcher(counting, settings, lambda name: FakeExecutor(handler), clock, WORKER, guard=guard)

    await run_until_idle(dispatcher, done)

    assert reads_seen == [1, 1, 1, 1, 1]
    assert counting.calls["loop_values"] <= 1  # the failure count, read once per guard
    assert (await db.count_by_status())[TaskStatus.COMPLETED] == 5


async def test_a_pause_from_another_process_during_a_task_stops_the_next_claim(
    db: SqliteStore, settings: Settings, clock: ManualClock, alerts: AlertHook
) -> None:
    await db.add_task(NewTask("first", priority=1))
    second = await db.add_task(NewTask("second", priority=2))
    guard = Guard(db, settings, clock, alerts)
    ran: list[str] = []

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        ran.append(task.subject)
        other = await SqliteStore.open(settings.store.path, clock=clock)
        try:
            await pause(other, reason="person", by="human", now_ms=clock.now_ms())
        finally:
            await other.close()
        return Outcome(OutcomeKind.SUCCESS)

    dispatcher = Dispatcher(db, settings, lambda name: FakeExecutor(handler), clock, WORKER, guard=guard)
    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    try:
        async with asyncio.timeout(SAFETY_S):
            while dispatcher.closed_gate is None:  # the loop saw the pause and idles
                await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.wait_for(loop_task, SAFETY_S)

    assert ran == ["first"]
    assert (await db.get_task(second.task_id or 0)).status is TaskStatus.PENDING
    assert not (await read_gate(db)).is_open(clock.now_ms())


async def test_with_a_daily_cap_the_gate_answer_is_never_reused(
    db: SqliteStore, settings: Settings, clock: ManualClock, alerts: AlertHook
) -> None:
    capped = replace(settings, budget=replace(settings.budget, daily_usd=100.0))
    guard = Guard(db, capped, clock, alerts)

    decision = await guard.may_claim(clock.now_ms())

    assert decision.may_claim
    assert guard.open_at_version is None  # spend moves with every finish: ask each time


async def test_an_open_gate_read_is_reusable_until_the_guard_writes(
    db: SqliteStore, settings: Settings, clock: ManualClock, alerts: AlertHook
) -> None:
    guard = Guard(db, settings, clock, alerts)

    await guard.may_claim(clock.now_ms())
    assert guard.open_at_version == await db.data_version()

    task = (await db.add_task(NewTask("x"))).task_id
    claim = await db.claim_next(worker=WORKER, lease_ms=60_000)
    assert claim is not None
    assert task == claim.task.id
    recorded = await db.finish(claim, Outcome(OutcomeKind.AUTH, error="401"), TaskStatus.FAILED, worker=WORKER)
    await guard.after_outcome(recorded, Outcome(OutcomeKind.AUTH, error="401"))

    assert guard.open_at_version is None
    assert not (await guard.may_claim(clock.now_ms())).may_claim
