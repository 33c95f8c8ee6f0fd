"""The loop's one way through a task — claim, run, record — and the guard's say in
what may be claimed: paused or gated loops claim nothing, approvals hold a task
unrun."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from dispatch.alerts import AlertHook
from dispatch.executors import RunContext
from dispatch.executors.fake import FakeExecutor
from dispatch.guard import Guard
from dispatch.loop import Dispatcher
from tests.dispatch.conftest import WORKER, MakeDispatcher, succeeds_setting, write_skill
from tests.dispatch.permissive import Permissive
from vigil.clock import ManualClock
from vigil.config import Settings
from vigil.gate import pause, read_gate, resume
from vigil.models import NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store import Store
from vigil.store.sqlite import SqliteStore

SAFETY_S = 10


class CountingStore:
    """Passes every call to the real store and counts them by method name."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if callable(attr):
            self.calls[name] += 1
        return attr


@pytest.fixture
async def guard(db: SqliteStore, settings: Settings, clock: ManualClock) -> AsyncIterator[Guard]:
    hook = AlertHook(settings.alerts, settings.home)
    yield Guard(db, settings, clock, hook)
    await hook.drain()


async def run_until_idle(dispatcher: Dispatcher, done: asyncio.Event) -> None:
    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.wait_for(done.wait(), SAFETY_S)
    stop.set()
    await asyncio.wait_for(loop_task, SAFETY_S)


async def test_back_to_back_tasks_are_each_claimed_then_recorded_once(
    db: SqliteStore, settings: Settings, clock: ManualClock
) -> None:
    for n in range(3):
        await db.add_task(NewTask(f"t{n}"))
    await db.add_task(NewTask("fails", max_retries=0))
    done = asyncio.Event()
    ran: list[str] = []

    def handler(task: Task, ctx: RunContext) -> Outcome:
        ran.append(task.subject)
        if len(ran) == 4:
            done.set()
        return Outcome(OutcomeKind.FAILED, error="no") if task.subject == "fails" else Outcome(OutcomeKind.SUCCESS)

    counting = CountingStore(db)
    dispatcher = Dispatcher(
        cast(Store, counting), settings, lambda name: FakeExecutor(handler), clock, WORKER, guard=Permissive()
    )

    await run_until_idle(dispatcher, done)

    assert ran == ["t0", "t1", "t2", "fails"]
    assert counting.calls["record"] == 4  # one door, whatever the outcome
    # each task's claim, and perhaps one look by the idle loop before the stop
    assert 4 <= counting.calls["claim_next"] <= 5
    counts = await db.count_by_status()
    assert (counts[TaskStatus.COMPLETED], counts[TaskStatus.FAILED]) == (3, 1)


async def test_a_paused_loop_claims_nothing_until_resumed(
    db: SqliteStore, settings: Settings, clock: ManualClock, guard: Guard
) -> None:
    await pause(db, reason="maintenance", by="human", now_ms=clock.now_ms())
    added = await db.add_task(NewTask("waits"))
    done = asyncio.Event()
    fake = FakeExecutor(succeeds_setting(done))
    dispatcher = Dispatcher(db, settings, lambda name: fake, clock, WORKER, guard=guard)

    assert await dispatcher.run_once() is None

    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.sleep(0.3)
    assert fake.calls == []
    other = await SqliteStore.open(settings.store.path, clock=clock)
    try:
        await resume(other, by="human", now_ms=clock.now_ms())  # another process: data_version moves
    finally:
        await other.close()
    await asyncio.wait_for(done.wait(), SAFETY_S)
    stop.set()
    await asyncio.wait_for(loop_task, SAFETY_S)
    assert (await db.get_task(added.task_id or 0)).status is TaskStatus.COMPLETED


async def test_an_auth_failure_gates_the_loop(
    db: SqliteStore, settings: Settings, clock: ManualClock, guard: Guard
) -> None:
    await db.add_task(NewTask("first", priority=1))
    await db.add_task(NewTask("second", priority=2))
    fake = FakeExecutor(lambda task, ctx: Outcome(OutcomeKind.AUTH, error="401 invalid key"))
    dispatcher = Dispatcher(db, settings, lambda name: fake, clock, WORKER, guard=guard)

    first = await dispatcher.run_once()
    second = await dispatcher.run_once()

    assert first is not None
    assert first.status is TaskStatus.PENDING
    assert second is None
    assert len(fake.calls) == 1
    assert not (await read_gate(db)).is_open(clock.now_ms())


async def test_a_task_needing_approval_is_held_unrun(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, clock: ManualClock, guard: Guard, home: Path
) -> None:
    write_skill(home, "spender", "description: Spends money.\nrequires_approval: true")
    added = await db.add_task(NewTask("buy things", skills=("spender",)))
    fake = FakeExecutor(lambda task, ctx: Outcome(OutcomeKind.SUCCESS))
    dispatcher = Dispatcher(db, settings, lambda name: fake, clock, WORKER, guard=guard)

    held = await dispatcher.run_once()

    assert held is not None
    assert held.id == added.task_id
    assert held.awaiting_approval
    assert fake.calls == []
    assert await db.open_runs() == []

    await db.approve(held.id, actor="human")
    done = await dispatcher.run_once()
    assert done is not None
    assert done.status is TaskStatus.COMPLETED
    assert len(fake.calls) == 1


async def test_a_run_that_asked_is_no_transient_failure_to_the_guard(
    db: SqliteStore, settings: Settings, clock: ManualClock, guard: Guard
) -> None:
    """The agent asked a person, then its CLI ended badly (a 529): the task waits
    for the answer and the run is recorded as asked, so the loop does not back off
    as after an outage."""
    added = await db.add_task(NewTask("deploy"))

    async def asks_then_breaks(task: Task, ctx: RunContext) -> Outcome:
        await db.ask(task.id, "staging or prod?", ("staging", "prod"), actor="agent")
        return Outcome(OutcomeKind.TRANSIENT, error="API error: 529 overloaded")

    fake = FakeExecutor(asks_then_breaks)
    dispatcher = Dispatcher(db, settings, lambda name: fake, clock, WORKER, guard=guard)

    recorded = await dispatcher.run_once()

    assert recorded is not None
    assert (recorded.id, recorded.status) == (added.task_id, TaskStatus.WAITING)
    (run,) = await db.list_runs(recorded.id)
    assert run.outcome == "asked"
    assert (await read_gate(db)).is_open(clock.now_ms())  # no backoff gate
