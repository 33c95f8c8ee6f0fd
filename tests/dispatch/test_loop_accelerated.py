"""The dispatcher under an accelerated clock (k = 100): the heartbeat, and the lease
it renews, are kept in clock time, so a task that runs for simulated minutes keeps
a live lease and an idle loop's heartbeat stays fresh in simulated time."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from dispatch.executors import RunContext
from tests.dispatch.conftest import MakeDispatcher
from vigil.clock import AcceleratedClock
from vigil.config import Settings
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat, NewTask, Outcome, OutcomeKind, Task
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow

FACTOR = 100
SAFETY_S = 30.0
HEARTBEAT_MS = 10_000  # 0.1 s real
LEASE_MS = 120_000  # 1.2 s real


@pytest.fixture
def clock() -> AcceleratedClock:  # replaces the manual clock for this module's store and dispatcher
    return AcceleratedClock(FACTOR)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return replace(settings, dispatch=replace(settings.dispatch, heartbeat_ms=HEARTBEAT_MS, lease_ms=LEASE_MS))


async def test_a_long_run_keeps_its_lease_in_simulated_time(
    db: SqliteStore, make_dispatcher: MakeDispatcher, clock: AcceleratedClock
) -> None:
    """A 300-simulated-second run (3 s real): the lease, 120 simulated seconds long,
    is renewed all along. Beating every 10 *real* seconds, it lapsed after 1.2 s."""
    renewed: list[int] = []

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        assert task.lease_until is not None
        await asyncio.sleep(3.0)
        now = await db.get_task(task.id)
        assert now.lease_until is not None
        renewed.append(now.lease_until - task.lease_until)
        return Outcome(OutcomeKind.SUCCESS)

    dispatcher, _ = make_dispatcher(handler)
    await db.add_task(NewTask("long"))
    assert await dispatcher.run_once() is not None
    (advance,) = renewed
    assert advance >= 150_000  # renewed at least halfway through the simulated 300 s


async def test_an_idle_loop_beats_in_simulated_time(
    db: SqliteStore, make_dispatcher: MakeDispatcher, clock: AcceleratedClock
) -> None:
    dispatcher, _ = make_dispatcher(lambda task, ctx: Outcome(OutcomeKind.SUCCESS))
    stop = asyncio.Event()
    loop_task = asyncio.create_task(dispatcher.run_forever(stop))
    await asyncio.sleep(4.0)  # 400 simulated seconds of idling
    beat = DispatcherHeartbeat.from_json((await db.loop_values()).get(HEARTBEAT_KEY))
    age_ms = clock.now_ms() - beat.heartbeat_at if beat is not None else None
    stop.set()
    await asyncio.wait_for(loop_task, SAFETY_S)
    assert beat is not None
    assert beat.state == "idle"
    assert age_ms is not None
    assert age_ms < 200_000  # beats every 10-15 simulated seconds; 400 old if it beat in real time
