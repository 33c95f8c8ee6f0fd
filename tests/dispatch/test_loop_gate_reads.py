"""The guard's gate is read before every claim, back-to-back tasks included, so a
pause another process commits while a task runs stops the next claim."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import cast

import pytest

from dispatch.alerts import AlertHook
from dispatch.executors import RunContext
from dispatch.executors.fake import FakeExecutor
from dispatch.guard import Guard
from dispatch.loop import Dispatcher
from tests.dispatch.conftest import WORKER
from tests.dispatch.test_loop_guard import SAFETY_S, CountingStore, run_until_idle
from vigil.clock import ManualClock
from vigil.config import Settings
from vigil.gate import pause, read_gate
from vigil.models import NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store import Store
from vigil.store.sqlite import SqliteStore


@pytest.fixture
async def alerts(settings: Settings) -> AsyncIterator[AlertHook]:
    hook = AlertHook(settings.alerts, settings.home)
    yield hook
    await hook.drain()


async def test_back_to_back_tasks_read_the_gate_before_each_claim(
    db: SqliteStore, settings: Settings, clock: ManualClock, alerts: AlertHook
) -> None:
    for n in range(5):
        await db.add_task(NewTask(f"t{n}"))
    counting = CountingStore(db)
    guard = Guard(cast(Store, counting), settings, clock, alerts)
    done = asyncio.Event()
    reads_seen: list[int] = []  # loop-state reads made before each task ran

    def handler(task: Task, ctx: RunContext) -> Outcome:
        reads_seen.append(counting.calls["loop_values"])
        if len(reads_seen) == 5:
            done.set()
        return Outcome(OutcomeKind.SUCCESS)

    dispatcher = Dispatcher(
        cast(Store, counting), settings, lambda name: FakeExecutor(handler), clock, WORKER, guard=guard
    )

    await run_until_idle(dispatcher, done)

    assert reads_seen[0] >= 1
    assert all(later > earlier for earlier, later in itertools.pairwise(reads_seen))
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
            while dispatcher.claim_restriction is None:  # the loop saw the pause and idles
                await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.wait_for(loop_task, SAFETY_S)

    assert ran == ["first"]
    assert (await db.get_task(second.task_id or 0)).status is TaskStatus.PENDING
    assert not (await read_gate(db)).is_open(clock.now_ms())
