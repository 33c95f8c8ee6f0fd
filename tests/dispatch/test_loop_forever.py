"""``Dispatcher.run_forever``: idle wake-ups, heartbeat states, graceful stop."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from dispatch.executors import RunContext
from tests.dispatch.conftest import MakeDispatcher, succeeds_setting
from vigil.clock import ManualClock
from vigil.config import Settings
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat, NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store.sqlite import SqliteStore

SAFETY_S = 10  # generous: only stops a broken test from hanging


async def heartbeat(db: SqliteStore) -> DispatcherHeartbeat | None:
    return DispatcherHeartbeat.from_json((await db.loop_values()).get(HEARTBEAT_KEY))


async def test_a_task_added_by_another_connection_wakes_the_idle_loop(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, clock: ManualClock
) -> None:
    ran = asyncio.Event()

    def handler(task: Task, ctx: RunContext) -> Outcome:
        ran.set()
        return Outcome(OutcomeKind.SUCCESS)

    # A heartbeat far away: only the data_version probe can notice the other writer.
    slow = replace(settings, dispatch=replace(settings.dispatch, heartbeat_ms=3_600_000))
    dispatcher, fake = make_dispatcher(handler, settings=slow)
    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.sleep(0.3)  # idle now
    assert fake.calls == []

    other = await SqliteStore.open(settings.store.path, clock=clock)
    try:
        await other.add_task(NewTask("from another process"))
    finally:
        await other.close()
    await asyncio.wait_for(ran.wait(), SAFETY_S)

    stop.set()
    await asyncio.wait_for(loop_task, SAFETY_S)
    assert [t.subject for t, _ in fake.calls] == ["from another process"]


async def test_wake_starts_a_task_added_in_this_process(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings
) -> None:
    ran = asyncio.Event()
    dispatcher, _ = make_dispatcher(succeeds_setting(ran), poll_s=3600)
    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.sleep(0.1)

    await db.add_task(NewTask("from a sensor"))  # same connection: data_version does not move
    dispatcher.wake()
    await asyncio.wait_for(ran.wait(), SAFETY_S)

    stop.set()
    await asyncio.wait_for(loop_task, SAFETY_S)


async def test_the_loop_sleeps_until_the_next_due_task(
    db: SqliteStore, make_dispatcher: MakeDispatcher, clock: ManualClock
) -> None:
    ran = asyncio.Event()
    dispatcher, fake = make_dispatcher(succeeds_setting(ran))
    await db.add_task(NewTask("in a minute", scheduled_for=clock.now_ms() + 60_000))
    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.sleep(0.3)
    assert fake.calls == []

    clock.advance(60_000)
    await asyncio.wait_for(ran.wait(), SAFETY_S)

    stop.set()
    await asyncio.wait_for(loop_task, SAFETY_S)


async def test_heartbeat_states_idle_running_stopped(db: SqliteStore, make_dispatcher: MakeDispatcher) -> None:
    states: list[tuple[str, int | None]] = []

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        beat = await heartbeat(db)
        assert beat is not None
        states.append((beat.state, beat.task_id))
        return Outcome(OutcomeKind.SUCCESS)

    dispatcher, _ = make_dispatcher(handler)
    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.sleep(0.2)
    idle = await heartbeat(db)
    added = await db.add_task(NewTask("t"))
    dispatcher.wake()
    while not states:
        await asyncio.sleep(0.02)
    stop.set()
    await asyncio.wait_for(loop_task, SAFETY_S)

    assert idle is not None
    assert (idle.state, idle.task_id) == ("idle", None)
    assert states == [("running", added.task_id)]
    stopped = await heartbeat(db)
    assert stopped is not None
    assert (stopped.state, stopped.task_id) == ("stopped", None)


async def test_stop_lets_a_task_finish_within_the_grace(db: SqliteStore, make_dispatcher: MakeDispatcher) -> None:
    started = asyncio.Event()

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        started.set()
        await asyncio.sleep(0.3)
        return Outcome(OutcomeKind.SUCCESS, summary="finished in time")

    dispatcher, _ = make_dispatcher(handler)  # grace 5 s
    added = await db.add_task(NewTask("t"))
    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.wait_for(started.wait(), SAFETY_S)

    stop.set()
    await asyncio.wait_for(loop_task, SAFETY_S)

    task = await db.get_task(added.task_id or 0)
    assert task.status is TaskStatus.COMPLETED
    assert task.result_summary == "finished in time"


async def test_stop_past_the_grace_ends_the_run_as_stopped_and_requeues_without_counting(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, clock: ManualClock
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Outcome(OutcomeKind.SUCCESS)

    short = replace(settings, dispatch=replace(settings.dispatch, shutdown_grace_ms=200))
    dispatcher, _ = make_dispatcher(handler, settings=short)
    added = await db.add_task(NewTask("long"))
    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.wait_for(started.wait(), SAFETY_S)

    stop.set()
    await asyncio.wait_for(loop_task, SAFETY_S)

    assert cancelled.is_set()
    task = await db.get_task(added.task_id or 0)
    assert task.status is TaskStatus.PENDING
    assert task.attempt_count == 0
    assert task.scheduled_for == clock.now_ms()
    assert task.claimed_by is None
    (run,) = await db.list_runs(task.id)
    assert (run.outcome, run.error) == ("stopped", "dispatcher stopped")


async def test_hurry_skips_the_rest_of_the_grace(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings
) -> None:
    started = asyncio.Event()

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        started.set()
        await asyncio.sleep(3600)
        return Outcome(OutcomeKind.SUCCESS)

    long_grace = replace(settings, dispatch=replace(settings.dispatch, shutdown_grace_ms=3_600_000))
    dispatcher, _ = make_dispatcher(handler, settings=long_grace)
    added = await db.add_task(NewTask("long"))
    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.wait_for(started.wait(), SAFETY_S)

    stop.set()
    await asyncio.sleep(0.1)
    assert not loop_task.done()  # waiting out the grace
    dispatcher.hurry()
    await asyncio.wait_for(loop_task, SAFETY_S)

    assert (await db.get_task(added.task_id or 0)).status is TaskStatus.PENDING
