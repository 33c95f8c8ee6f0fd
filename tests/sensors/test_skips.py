"""Runs not made, and catch-up after downtime: each run a sensor did not make is
recorded in its state with the reason (downtime, disabled, backoff, busy), and
``catch_up`` decides whether the latest run missed while no process ran it is made."""

from __future__ import annotations

import asyncio

from sensors.api import FoundTask, SensorContext
from sensors.runner import SensorRunner
from tests.sensors.conftest import RunnerFactory, SpecFactory, tick
from vigil.clock import ManualClock, SystemClock
from vigil.config import Settings
from vigil.models import SensorRun, SensorSkip, SensorState
from vigil.store.sqlite import SqliteStore

MIN = 60_000
HOUR = 60 * MIN

runs: list[int] = []


async def counting(ctx: SensorContext) -> list[FoundTask]:
    runs.append(ctx.clock.now_ms())
    if ctx.options.get("fail"):
        raise RuntimeError("down")
    return []


async def _state(store: SqliteStore, name: str) -> SensorState:
    state = await store.sensor_state(name)
    assert state is not None
    return state


async def test_runs_missed_while_down_are_recorded_and_the_latest_is_made(
    store: SqliteStore, clock: ManualClock, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    runs.clear()
    runner = make_runner(make_spec(counting, "minutely", every="1m"))
    start = clock.now_ms()
    await tick(runner)
    clock.advance(10 * MIN)  # nine runs fell due while no process ran it
    await tick(runner)
    assert runs == [start, start + 10 * MIN]
    state = await _state(store, "minutely")
    assert state.skips == (SensorSkip("downtime", start + MIN, start + 9 * MIN, 9),)
    clock.advance(MIN)
    await tick(runner)
    assert (await _state(store, "minutely")).skips == state.skips  # on time again: nothing more


async def test_each_tick_of_a_disabled_sensor_is_a_skipped_run(
    store: SqliteStore, clock: ManualClock, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    runs.clear()
    runner = make_runner(make_spec(counting, "paused", cron="*/5 * * * *"))
    await store.set_sensor_enabled("paused", False)
    start = clock.now_ms()  # 00:00, an occurrence
    for _ in range(3):
        await tick(runner)
        clock.advance(5 * MIN)
    assert runs == []
    assert (await _state(store, "paused")).skips == (SensorSkip("disabled", start, start + 10 * MIN, 3),)


async def test_a_failure_records_the_runs_its_backoff_skips(
    store: SqliteStore, clock: ManualClock, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    runs.clear()
    runner = make_runner(make_spec(counting, "flaky", every="1m", options={"fail": True}))
    start = clock.now_ms()
    await tick(runner)  # fails: the next run waits 2 minutes, one run is skipped
    clock.advance(2 * MIN)
    await tick(runner)  # fails again: 4 minutes, three runs skipped
    state = await _state(store, "flaky")
    assert state.skips == (
        SensorSkip("backoff", start + MIN, start + MIN, 1),
        SensorSkip("backoff", start + 3 * MIN, start + 5 * MIN, 3),
    )
    clock.advance(MIN)
    assert await tick(runner) == []  # backing off: not a new skip, it was recorded above
    assert (await _state(store, "flaky")).skips == state.skips


async def _ran_hours_ago(store: SqliteStore, name: str) -> int:
    """A sensor's last run 3.5 h ago, every hour: its runs due 2.5, 1.5 and 0.5 h ago
    were not made. Returns the first of them."""
    last = SystemClock().now_ms() - 7 * HOUR // 2
    await store.record_sensor_run(name, SensorRun(last, 1, "ok", next_due_at=last + HOUR), [], None)
    return last + HOUR


async def _skips(store: SqliteStore, name: str) -> tuple[SensorSkip, ...]:
    async with asyncio.timeout(20):  # a safety net: the scheduler records it at once
        while (state := await store.sensor_state(name)) is None or not state.skips:
            await asyncio.sleep(0.02)
    return state.skips


async def test_catch_up_once_makes_the_latest_missed_run_at_start(
    store: SqliteStore, settings: Settings, make_spec: SpecFactory
) -> None:
    runs.clear()
    first = await _ran_hours_ago(store, "hourly")
    runner = SensorRunner(store, settings, SystemClock(), [make_spec(counting, "hourly", every="1h")])
    await runner.start()
    try:
        skips = await _skips(store, "hourly")
        async with asyncio.timeout(20):
            while not runs:
                await asyncio.sleep(0.02)
    finally:
        await runner.stop()
    assert len(runs) == 1
    assert skips == (SensorSkip("downtime", first, first + HOUR, 2),)  # the third is the run made


async def test_catch_up_skip_waits_for_the_next_run_and_records_the_missed_ones(
    store: SqliteStore, settings: Settings, make_spec: SpecFactory
) -> None:
    runs.clear()
    first = await _ran_hours_ago(store, "hourly")
    spec = make_spec(counting, "hourly", every="1h", catch_up="skip")
    runner = SensorRunner(store, settings, SystemClock(), [spec])
    await runner.start()
    try:
        skips = await _skips(store, "hourly")  # recorded when the scheduler judged the run too late
    finally:
        await runner.stop()
    assert runs == []
    assert skips == (SensorSkip("downtime", first, first + 2 * HOUR, 3),)


async def test_a_tick_while_the_last_run_still_goes_is_a_busy_skip(
    store: SqliteStore, settings: Settings, make_spec: SpecFactory
) -> None:
    release = asyncio.Event()

    async def slow(ctx: SensorContext) -> list[FoundTask]:
        await release.wait()
        return []

    runner = SensorRunner(store, settings, SystemClock(), [make_spec(slow, "slow", every="100ms")])
    await runner.start()
    try:
        skips = await _skips(store, "slow")
    finally:
        release.set()
        await runner.stop()
    assert skips[0].reason == "busy"
