"""The alert hook: ``[alerts] command = [...]`` run with one JSON event on stdin.

Every event is a JSON object with at least::

    {"event": <kind>, "at": epoch_ms, "at_iso": "2026-01-01T00:00:00Z",
     "home": "/path/to/home", "message": "one line for people"}

plus fields of its kind (``gate``, ``task_id``, ``spent_usd`` …; see
docs/guardrails.md). Kinds: ``gate_changed``, ``auth_failed``, ``budget_warning``,
``task_failed``, ``dispatcher_stale``, ``sensor_stale``, ``test``, and when
``[alerts] task_events`` subscribes to them ``task_added`` and ``task_completed``
(``dispatch.task_alerts``).

The hook runs in its own process group with the home as working directory, the
caller's environment plus ``VIGIL_HOME`` and ``VIGIL_ALERT_EVENT``, and a timeout
(``[alerts] timeout``; the whole group is killed past it). A hook that is missing,
fails, or hangs is logged and never raised: alerting must not stop the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import Mapping
from pathlib import Path

from vigil.clock import iso_utc
from vigil.config import AlertSettings

log = logging.getLogger("vigil.alerts")

EVENT_KINDS = (
    "gate_changed",
    "auth_failed",
    "budget_warning",
    "task_failed",
    "task_denied",
    "task_added",
    "task_completed",
    "dispatcher_stale",
    "sensor_stale",
    "test",
)
STDERR_LOGGED = 500  # characters of a failing hook's stderr kept in the log line


def make_event(kind: str, message: str, now_ms: int, **fields: object) -> dict[str, object]:
    """An event of ``kind`` (one of ``EVENT_KINDS``) with the common fields."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown alert event {kind!r}")
    return {"event": kind, "at": now_ms, "at_iso": iso_utc(now_ms), "message": message, **fields}


class AlertHook:
    """Sends events to the configured command. With no command, events are only logged.

    ``notify`` queues an event for the background (the loop goes on at once); queued
    events are sent one at a time, in order. ``send`` sends at once and waits.
    ``drain`` waits until every queued event was sent (shutdown, tests).
    """

    def __init__(self, settings: AlertSettings, home: Path) -> None:
        self._settings = settings
        self._home = home
        self._tail: asyncio.Task[None] | None = None  # the last queued send
        self.last_error: str | None = None  # why the last send failed (None: it did not)

    @property
    def configured(self) -> bool:
        return bool(self._settings.command)

    def notify(self, event: Mapping[str, object]) -> None:
        """Queue ``event``: it is sent after every event queued before it."""
        self._tail = asyncio.get_running_loop().create_task(self._after(self._tail, event))

    async def _after(self, previous: asyncio.Task[None] | None, event: Mapping[str, object]) -> None:
        if previous is not None:
            await asyncio.wait({previous})
        await self.send(event)

    async def drain(self) -> None:
        """Wait until every queued event was sent (each send is bounded by the timeout)."""
        while self._tail is not None and not self._tail.done():
            await asyncio.wait({self._tail})

    async def send(self, event: Mapping[str, object]) -> bool:
        """Run the hook with ``event``; True when it exited 0. Never raises (but
        cancellation, which also ends the hook's process group)."""
        log.info("alert %s: %s", event.get("event"), event.get("message"))
        if not self._settings.command:
            return False
        self.last_error = None
        payload = json.dumps({**event, "home": str(self._home)}).encode()
        env = {**os.environ, "VIGIL_HOME": str(self._home), "VIGIL_ALERT_EVENT": str(event.get("event"))}
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._settings.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                cwd=self._home,
                env=env,
                start_new_session=True,  # its own group: a timeout ends its children too
            )
        except OSError as err:
            return self._failed(f"could not start: {err.strerror or err}")
        try:
            _, stderr = await asyncio.wait_for(proc.communicate(payload), self._settings.timeout_ms / 1000)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            return self._failed(f"timed out after {self._settings.timeout_ms} ms and was killed")
        except BaseException:
            _kill_group(proc.pid)
            raise
        if proc.returncode != 0:
            text = " ".join(stderr.decode(errors="replace").split())[-STDERR_LOGGED:]
            return self._failed(f"exited {proc.returncode}" + (f": {text}" if text else ""))
        return True

    def _failed(self, problem: str) -> bool:
        self.last_error = f"alert hook {self._settings.command[0]} {problem}"
        log.error("%s", self.last_error)
        return False


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
