"""Stale dispatcher and sensors: alerted once per incident, again after recovery, and
never after a clean stop."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dispatch.alerts import AlertHook
from dispatch.watchdog import check_stale, watch
from tests.guard.support import guard_settings, recorded
from vigil.clock import ManualClock
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat, SensorRun
from vigil.store.sqlite import SqliteStore

MINUTE = 60_000


async def _beat(store: SqliteStore, at: int, state: str = "idle") -> None:
    beat = DispatcherHeartbeat("host:1:ab", 1, "host", at, at, state)
    await store.set_loop_values({HEARTBEAT_KEY: beat.to_json()})


async def _sensor_ran(store: SqliteStore, clock: ManualClock, next_due_at: int) -> None:
    run = SensorRun(started_at=clock.now_ms(), duration_ms=3, status="ok", next_due_at=next_due_at)
    await store.record_sensor_run("feeds", run, [], None)


async def test_each_incident_alerts_once(store: SqliteStore, clock: ManualClock, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    settings = guard_settings(tmp_path, events, alerts={"stale_dispatcher": "5m", "stale_sensor": "30m"})
    hook = AlertHook(settings.alerts, settings.home)

    async def check() -> list[str]:
        return [str(e["event"]) for e in await check_stale(store, settings, hook, clock.now_ms())]

    await _beat(store, clock.now_ms())
    await _sensor_ran(store, clock, next_due_at=clock.now_ms() + MINUTE)
    assert await check() == []
    clock.advance(5 * MINUTE + 1)
    assert await check() == ["dispatcher_stale"]
    assert await check() == []  # the same incident
    clock.advance(30 * MINUTE)
    assert await check() == ["sensor_stale"]
    await _beat(store, clock.now_ms())  # the dispatcher is back
    assert await check() == []
    clock.advance(5 * MINUTE + 1)
    assert await check() == ["dispatcher_stale"]  # a new incident
    [sensor_event] = [e for e in recorded(events) if e["event"] == "sensor_stale"]
    assert sensor_event["sensor"] == "feeds"
    assert "overdue by 34m" in str(sensor_event["message"])


async def test_a_clean_stop_is_not_an_incident(store: SqliteStore, clock: ManualClock, tmp_path: Path) -> None:
    settings = guard_settings(tmp_path, tmp_path / "events.jsonl")
    hook = AlertHook(settings.alerts, settings.home)
    await _beat(store, clock.now_ms(), state="stopped")
    await _sensor_ran(store, clock, next_due_at=clock.now_ms())
    clock.advance(7 * 24 * 60 * MINUTE)
    assert await check_stale(store, settings, hook, clock.now_ms()) == []


async def test_watch_checks_until_stopped_and_alerts_once(
    store: SqliteStore, clock: ManualClock, tmp_path: Path
) -> None:
    events = tmp_path / "events.jsonl"
    settings = guard_settings(tmp_path, events, alerts={"stale_sensor": "30m"})
    hook = AlertHook(settings.alerts, settings.home)
    await _sensor_ran(store, clock, next_due_at=clock.now_ms())
    clock.advance(31 * MINUTE)
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch(store, settings, hook, clock, stop, interval_s=0.02))
    for _ in range(500):  # a safety net: the first check alerts almost at once
        if recorded(events):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)  # a few more checks of the same incident
    stop.set()
    await asyncio.wait_for(watcher, 10)
    assert [e["event"] for e in recorded(events)] == ["sensor_stale"]
