"""Scheduling: due times from persisted state (injected clock, forced runs), back-off,
enable/disable, and one short real-time check of the APScheduler wiring."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sensors.api import FoundTask, SensorContext
from sensors.runner import SensorRunner
from sensors.runs import DUE_TOLERANCE_MS
from tests.sensors.conftest import RunnerFactory, SpecFactory, tick
from vigil.clock import AcceleratedClock, ManualClock, SystemClock
from vigil.config import Settings
from vigil.errors import InputError
from vigil.store.sqlite import SqliteStore

MIN = 60_000

runs: list[str] = []


async def minutely(ctx: SensorContext) -> list[FoundTask]:
    runs.append(ctx.name)
    return [FoundTask(key=str(ctx.clock.now_ms()), subject="tick")]


async def failing(ctx: SensorContext) -> list[FoundTask]:
    runs.append(ctx.name)
    if ctx.options.get("fail", True):
        raise RuntimeError("down")
    return []


@pytest.fixture(autouse=True)
def _reset_runs() -> None:
    runs.clear()


async def test_sensors_run_when_due_by_the_injected_clock(
    clock: ManualClock, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    runner = make_runner(make_spec(minutely, "fast", every="1m"), make_spec(minutely, "slow", every="10m"))
    await tick(runner)
    assert sorted(runs) == ["fast", "slow"]  # never ran: both due
    runs.clear()
    clock.advance(30_000)
    await tick(runner)
    assert runs == []
    clock.advance(30_000)
    await tick(runner)
    assert runs == ["fast"]
    runs.clear()
    clock.advance(9 * MIN)
    await tick(runner)
    assert sorted(runs) == ["fast", "slow"]


async def test_a_restart_does_not_fire_every_sensor_at_once(
    store: SqliteStore, settings: Settings, clock: ManualClock, make_spec: SpecFactory
) -> None:
    specs = [make_spec(minutely, "a", every="1m"), make_spec(minutely, "b", every="1h")]
    await tick(SensorRunner(store, settings, clock, specs))
    runs.clear()
    clock.advance(2 * MIN)
    restarted = SensorRunner(store, settings, clock, specs)  # a new process, same database
    await tick(restarted)
    assert runs == ["a"]
    b = next(s for s in await store.sensor_states() if s.name == "b")
    assert b.last_run_at is not None
    assert restarted.due_at(specs[1], b) == b.last_run_at + 60 * MIN


async def test_a_failing_sensor_backs_off_visibly_and_recovers(
    store: SqliteStore, clock: ManualClock, settings: Settings, make_spec: SpecFactory
) -> None:
    spec = make_spec(failing, "flaky", every="1m")
    runner = SensorRunner(store, settings, clock, [spec])
    intervals = []
    for _ in range(4):
        await tick(runner)
        state = (await store.sensor_states())[0]
        intervals.append((state.next_due_at or 0) - (state.last_run_at or 0))
        clock.set(state.next_due_at or 0)
    assert intervals == [2 * MIN, 4 * MIN, 8 * MIN, 16 * MIN]
    assert state.consecutive_failures == 4
    assert state.last_status == "error"

    clock.advance(-DUE_TOLERANCE_MS - 1)
    assert await tick(runner) == []  # not due early
    clock.advance(DUE_TOLERANCE_MS + 1)
    healthy = SensorRunner(store, settings, clock, [make_spec(failing, "flaky", every="1m", options={"fail": False})])
    await tick(healthy)
    state = (await store.sensor_states())[0]
    assert (state.consecutive_failures, state.last_status) == (0, "ok")
    assert state.next_due_at == (state.last_run_at or 0) + MIN


async def test_the_backoff_is_capped_by_max_backoff(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_spec: SpecFactory
) -> None:
    from vigil.config import SensorDefaults, StoreSettings

    settings = Settings(
        tmp_path, None, StoreSettings(tmp_path / "x.db"), sensor_defaults=SensorDefaults(max_backoff_ms=5 * MIN)
    )
    runner = SensorRunner(store, settings, clock, [make_spec(failing, "flaky", every="1m")])
    for _ in range(6):
        await tick(runner)
        clock.advance(60 * MIN)
    state = (await store.sensor_states())[0]
    assert (state.next_due_at or 0) - (state.last_run_at or 0) == 5 * MIN


async def test_disabled_sensors_do_not_run_on_schedule_but_run_when_named(
    store: SqliteStore, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    runner = make_runner(make_spec(minutely, "a"), make_spec(minutely, "b"), make_spec(minutely, "off", enabled=False))
    await store.set_sensor_enabled("b", False)
    await tick(runner)
    assert runs == ["a"]
    runs.clear()
    assert [r.name for r in await runner.run_now()] == ["a"]
    runs.clear()
    await runner.run_now(["b", "off"])
    assert runs == ["b", "off"]
    with pytest.raises(InputError, match="unknown sensor 'nope'"):
        await runner.run_now(["nope"])


async def test_apscheduler_runs_each_sensor_on_its_schedule_and_stop_is_clean(
    store: SqliteStore, settings: Settings, make_spec: SpecFactory
) -> None:
    """The one real-time test: a 100 ms interval, checked with a generous timeout."""
    woken: list[int] = []
    runner = SensorRunner(
        store,
        settings,
        SystemClock(),
        [make_spec(minutely, "quick", every="100ms"), make_spec(minutely, "later", every="1h")],
        on_created=lambda: woken.append(1),
    )
    await runner.start()
    try:
        async with asyncio.timeout(20):
            while runs.count("quick") < 3:
                await asyncio.sleep(0.02)
    finally:
        await runner.stop()
    assert runs.count("later") == 1  # ran once at start (never ran before), then waits an hour
    assert len(woken) >= 3
    count = len(runs)
    await asyncio.sleep(0.3)
    assert len(runs) == count  # stopped: nothing more runs


async def test_stop_cancels_a_run_in_flight(store: SqliteStore, settings: Settings, make_spec: SpecFactory) -> None:
    started = asyncio.Event()

    async def slow(ctx: SensorContext) -> list[FoundTask]:
        started.set()
        await asyncio.sleep(3600)
        return []

    runner = SensorRunner(store, settings, SystemClock(), [make_spec(slow, timeout_ms=3_600_000)])
    await runner.start()
    async with asyncio.timeout(20):
        await started.wait()
    async with asyncio.timeout(20):
        await runner.stop()
    assert await store.sensor_states() == []  # the cancelled run recorded nothing


async def test_a_scheduler_tick_skips_a_sensor_that_another_process_just_ran(
    store: SqliteStore, settings: Settings, clock: ManualClock, make_spec: SpecFactory
) -> None:
    """The job function itself, forced to run: it re-reads the persisted state."""
    from sensors.api import HttpPool

    spec = make_spec(minutely, "shared", every="5m")
    other_process = SensorRunner(store, settings, clock, [spec])
    ticking = SensorRunner(store, settings, clock, [spec])
    ticking._http = HttpPool()  # what start() provides; no scheduler: rescheduling is a no-op
    try:
        await other_process.run_now()
        runs.clear()
        clock.advance(MIN)
        await ticking._tick("shared")
        assert runs == []  # ran a minute ago elsewhere: not due
        clock.advance(4 * MIN)
        await ticking._tick("shared")
        assert runs == ["shared"]
        await store.set_sensor_enabled("shared", False)
        clock.advance(10 * MIN)
        await ticking._tick("shared")
        assert runs == ["shared"]  # disabled from another process: the tick skips it
    finally:
        await ticking.stop()


async def test_under_an_accelerated_clock_a_sensor_fires_on_simulated_time(
    store: SqliteStore, settings: Settings, make_spec: SpecFactory
) -> None:
    """k = 600: a one-minute sensor fires every 0.1 real seconds. Before the runner
    translated due times to the wall clock, APScheduler waited a real minute."""
    clock = AcceleratedClock(600)
    runner = SensorRunner(store, settings, clock, [make_spec(minutely, "minutely", every="1m")])
    await runner.start()
    try:
        async with asyncio.timeout(20):  # a safety net; it takes about 0.3 s
            while runs.count("minutely") < 4:
                await asyncio.sleep(0.02)
    finally:
        await runner.stop()
    (state,) = await store.sensor_states()
    assert state.last_run_at is not None
    assert state.next_due_at is not None
    # The schedule is kept in simulated time: the next run is the job's next fire, a
    # simulated minute after this one fired (a real minute would be 600 of them),
    # which is the run's start less the moments it took to start.
    assert MIN // 2 < state.next_due_at - state.last_run_at <= MIN


async def test_a_cron_sensor_that_never_ran_runs_at_its_first_occurrence(
    store: SqliteStore, settings: Settings, make_spec: SpecFactory
) -> None:
    """Its due time was the next occurrence after *now*, so at each tick it was due
    a minute later: it never ran under the scheduler. k = 600: a minute is 0.1 s."""
    runner = SensorRunner(store, settings, AcceleratedClock(600), [make_spec(minutely, "fresh", cron="* * * * *")])
    await runner.start()
    try:
        async with asyncio.timeout(20):  # a safety net; it takes about 0.2 s
            while runs.count("fresh") < 2:
                await asyncio.sleep(0.02)
    finally:
        await runner.stop()
