"""Stale dispatcher and sensors, found from the database alone and alerted once.

A dispatcher is stale when its heartbeat is older than ``[alerts] stale_dispatcher``
and it did not say ``stopped`` (a clean stop is a person's choice, not an incident).
A sensor is stale when it is enabled and overdue by more than ``[alerts]
stale_sensor``. Neither is checked after a clean stop: sensors run in the same
process as the dispatcher.

Each incident alerts once: the subjects already reported are kept in ``loop_state``
under ``alerts_stale`` (``{"dispatcher": since_ms, "sensor:feeds": since_ms}``) and
dropped when they recover, so a later incident alerts again. ``vigil run`` checks
every minute (``watch``); ``vigil alerts check`` runs the same check from cron or a
systemd timer, which also catches a ``vigil run`` that died.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from dispatch.alerts import AlertHook, make_event
from vigil.clock import Clock
from vigil.config import Settings
from vigil.durations import format_duration
from vigil.errors import VigilError
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat
from vigil.store import Store

STALE_KEY = "alerts_stale"
log = logging.getLogger("vigil.watchdog")


async def find_stale(store: Store, settings: Settings, now_ms: int) -> dict[str, dict[str, object]]:
    """Stale subjects now: ``"dispatcher"`` or ``"sensor:<name>"`` → an alert event."""
    found: dict[str, dict[str, object]] = {}
    beat = DispatcherHeartbeat.from_json((await store.loop_values()).get(HEARTBEAT_KEY))
    if beat is not None and beat.state == "stopped":
        return found
    if beat is not None and now_ms - beat.heartbeat_at > settings.alerts.stale_dispatcher_ms:
        silent = format_duration(now_ms - beat.heartbeat_at)
        message = f"dispatcher {beat.owner} has not reported for {silent} (is vigil run alive?)"
        found["dispatcher"] = make_event(
            "dispatcher_stale", message, now_ms, owner=beat.owner, heartbeat_at=beat.heartbeat_at
        )
    for sensor in await store.sensor_states():
        due = sensor.next_due_at
        if sensor.enabled and due is not None and now_ms - due > settings.alerts.stale_sensor_ms:
            message = f"sensor {sensor.name} is overdue by {format_duration(now_ms - due)}"
            found[f"sensor:{sensor.name}"] = make_event(
                "sensor_stale", message, now_ms, sensor=sensor.name, next_due_at=due, last_status=sensor.last_status
            )
    return found


async def check_stale(store: Store, settings: Settings, hook: AlertHook, now_ms: int) -> list[dict[str, object]]:
    """Alert each new stale subject once and forget the recovered ones; returns the
    events sent (awaited, so a cron run does not exit before its alerts)."""
    found = await find_stale(store, settings, now_ms)
    while True:
        raw = (await store.loop_values()).get(STALE_KEY)
        known = dict(raw) if isinstance(raw, dict) else {}
        new = [subject for subject in found if subject not in known]
        memory = {subject: known.get(subject, now_ms) for subject in found}
        if memory == known or await store.replace_loop_value(STALE_KEY, raw, memory):
            break
    events = [found[subject] for subject in new]
    for event in events:
        await hook.send(event)
    return events


async def watch(
    store: Store, settings: Settings, hook: AlertHook, clock: Clock, stop: asyncio.Event, *, interval_s: float = 60.0
) -> None:
    """Run ``check_stale`` every ``interval_s`` until ``stop`` (inside ``vigil run``:
    it notices overdue sensors and a dispatcher loop that hangs while the process
    lives). A failed check is logged and tried again at the next interval."""
    while not stop.is_set():
        try:
            await check_stale(store, settings, hook, clock.now_ms())
        except VigilError as err:
            log.warning("stale check failed: %s", err)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
