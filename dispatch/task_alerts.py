"""Task events for the alert hook: ``[alerts] task_events = ["added", "completed"]``.

The hook gets ``task_added`` when any task is created (by a person, a sensor, the
agent) and ``task_completed`` when one completes, whichever process made the
change: this follows the audit trail (``vigil.events``) as ``vigil events
--follow`` does, from the moment ``vigil run`` starts, and turns the subscribed
rows into events (within about a second). A task that failed for good is sent by the dispatcher's guard
(``task_failed``) whether subscribed or not.

Runs in the process that holds dispatch lane 0, so several lanes do not send each
event several times.
"""

from __future__ import annotations

import asyncio
import logging

from dispatch.alerts import AlertHook, make_event
from vigil.clock import Clock
from vigil.config import Settings
from vigil.errors import VigilError
from vigil.events import POSTGRES_LOOKBACK, EventFilter, stream_events
from vigil.models import TaskEvent
from vigil.store import Store

log = logging.getLogger("vigil.alerts")

RETRY_S = 5.0  # after a failed read (database busy or away), before following again
# The daemon's own commits (its dispatcher, its sensors) share its connection and do
# not move data_version: look at the trail this often too (one indexed read).
OWN_COMMITS_S = 1.0


def alert_kind(event: TaskEvent, subscribed: tuple[str, ...]) -> str | None:
    """The alert ``event`` becomes (``task_added``, ``task_completed``), or None."""
    if event.kind == "created" and "added" in subscribed:
        return "task_added"
    if event.kind == "status" and event.to_value == "completed" and "completed" in subscribed:
        return "task_completed"
    return None


async def forward_task_events(store: Store, settings: Settings, hook: AlertHook, clock: Clock) -> None:
    """Send the subscribed task events to ``hook`` until cancelled. Returns at once
    when nothing is subscribed."""
    subscribed = settings.alerts.task_events
    if not subscribed:
        return
    last = 0

    async def send(event: TaskEvent) -> None:
        nonlocal last
        last = event.id
        kind = alert_kind(event, subscribed)
        if kind is None:
            return
        try:
            task = await store.get_task(event.task_id)
        except VigilError:  # pruned or unreadable meanwhile: the event still goes out
            subject, source = None, None
        else:
            subject, source = task.subject, task.source
        what = "added" if kind == "task_added" else "completed"
        message = f"task #{event.task_id} {what}" + (f": {subject}" if subject else "")
        fields = {"task_id": event.task_id, "subject": subject, "source": source, "actor": event.actor}
        hook.notify(make_event(kind, message, event.at, **fields))

    lookback = 0 if settings.store.url is None else POSTGRES_LOOKBACK
    since = clock.now_ms()  # from now on: starting `vigil run` does not replay history
    while True:
        wanted = EventFilter(since_ms=since, kinds=("created", "status"), after_id=last)
        try:
            await stream_events(store, wanted, send, follow=True, lookback=lookback, read_every_s=OWN_COMMITS_S)
        except VigilError as err:
            log.warning("task events for alerts: %s; trying again in %.0fs", err, RETRY_S)
            await asyncio.sleep(RETRY_S)
