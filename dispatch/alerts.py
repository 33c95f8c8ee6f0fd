"""The alert hook: ``[alerts] command = [...]`` run with one JSON event on stdin.

Every event is a JSON object with at least::

    {"event": <kind>, "at": epoch_ms, "at_iso": "2026-01-01T00:00:00Z",
     "home": "/path/to/home", "message": "one line for people"}

plus fields of its kind (``gate``, ``task_id``, ``spent_usd`` …; see
docs/guardrails.md). Kinds: ``gate_changed``, ``auth_failed``, ``fallback_skipped``, ``budget_warning``,
``task_failed``, ``task_waiting``, ``task_denied``, ``dispatcher_stale``,
``sensor_stale``, ``test``, and when
``[alerts] task_events`` subscribes to them ``task_added`` and ``task_completed``
(``dispatch.task_alerts``).

The hook runs in its own process group with the home as working directory, an
explicit environment (``vigil.environment``: PATH, HOME, locale, proxies, the names
in ``[alerts] pass_env``) plus ``VIGIL_HOME`` and ``VIGIL_ALERT_EVENT``, never the
daemon's whole one, and a timeout (``[alerts] timeout``; the whole group is killed
past it). Secrets (``vigil.redaction``) are masked in every text of the event, the
task's subject and the message included: the hook forwards them to chat or mail. A
hook that is missing, fails, or hangs is logged and never raised: alerting must not
stop the loop.

An event about a task that needs a person (``PERSON_EVENTS``) carries ``link``, the
task in the served dashboard, when ``[serve] public_url`` is set
(``vigil.dashboard_access.task_link``; never the token, which is not kept).

Each event also goes to the notification services of ``[alerts] notify`` whose
kinds it is (``dispatch.notifiers``, through apprise), alike: a failing service is
logged, recorded for ``vigil status`` and ``vigil doctor``, and never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path

from dispatch.notifiers import Notifiers
from vigil.clock import iso_utc
from vigil.config import AlertSettings, Settings
from vigil.dashboard_access import task_link
from vigil.environment import explicit_env
from vigil.models import Task
from vigil.redaction import Redactor
from vigil.store import Store

log = logging.getLogger("vigil.alerts")

EVENT_KINDS = (
    "gate_changed",
    "auth_failed",
    "fallback_skipped",
    "account_held",
    "budget_warning",
    "task_failed",
    "task_waiting",
    "task_denied",
    "task_added",
    "task_completed",
    "dispatcher_stale",
    "sensor_stale",
    "test",
)
# Events about a task that waits for a person: they carry a link into the served dashboard.
PERSON_EVENTS = frozenset({"task_waiting", "task_failed", "task_denied"})
STDERR_LOGGED = 500  # characters of a failing hook's stderr kept in the log line


def waiting_event(task: Task, now_ms: int) -> dict[str, object]:
    """``task_waiting``: ``task``'s agent asked a person; the event says how to answer."""
    how = f'vigil task answer {task.id} "…"' + (" (or --choice N)" if task.choices else "")
    message = f"task #{task.id} waits for an answer: {task.question}"
    fields = {"task_id": task.id, "subject": task.subject, "question": task.question}
    return make_event("task_waiting", message, now_ms, **fields, choices=list(task.choices), answer_with=how)


def make_event(kind: str, message: str, now_ms: int, **fields: object) -> dict[str, object]:
    """An event of ``kind`` (one of ``EVENT_KINDS``) with the common fields."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown alert event {kind!r}")
    return {"event": kind, "at": now_ms, "at_iso": iso_utc(now_ms), "message": message, **fields}


DRAIN_AT_STOP_S = 3.0  # how long a stopping process waits for alerts still being sent


class AlertHook:
    """Sends events to the configured command. With no command, events are only logged.

    ``notify`` queues an event for the background (the loop goes on at once); queued
    events are sent one at a time, in order. ``send`` sends at once and waits.
    ``drain`` waits until every queued event was sent (shutdown, tests).
    """

    def __init__(
        self,
        settings: AlertSettings,
        home: Path,
        *,
        secrets: Redactor | None = None,
        store: Store | None = None,
        task_link: Callable[[int], str | None] | None = None,
    ) -> None:
        """``secrets``: what to mask in events (None: this process's secret-looking
        variables and the hook's ``pass_env``); ``store``: where the notification
        services' health is recorded (None: only logged); ``task_link``: a task's
        link in the served dashboard (None, or it returns None: no link)."""
        self._settings = settings
        self._task_link = task_link
        self._home = home
        self._secrets = secrets or Redactor.from_env(os.environ, settings.pass_env)
        self._notifiers = Notifiers(settings.notify, settings.timeout_ms / 1000, store)
        self._tail: asyncio.Task[None] | None = None  # the last queued send
        self.last_error: str | None = None  # why the last send failed (None: it did not)

    @property
    def configured(self) -> bool:
        return bool(self._settings.command) or bool(self._settings.notify)

    @property
    def notifiers(self) -> Notifiers:
        return self._notifiers

    def notify(self, event: Mapping[str, object]) -> None:
        """Queue ``event``: it is sent after every event queued before it."""
        self._tail = asyncio.get_running_loop().create_task(self._after(self._tail, event))

    async def _after(self, previous: asyncio.Task[None] | None, event: Mapping[str, object]) -> None:
        if previous is not None:
            try:
                await asyncio.wait({previous})
            except asyncio.CancelledError:
                previous.cancel()  # given up on (drain): the earlier ones too
                raise
        await self.send(event)

    async def drain(self, *, stopping: bool = False) -> None:
        """Wait until every queued event was sent (each send is bounded by the
        timeout); ``stopping``: at most ``DRAIN_AT_STOP_S`` in all, then give up on
        what is left (logged): a stop must not wait on a notification service."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_AT_STOP_S if stopping else None
        while self._tail is not None and not self._tail.done():
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                log.warning("stopping without the alerts still being sent (over %g s)", DRAIN_AT_STOP_S)
                self._tail.cancel()  # and through it, each queued before it (see _after)
                return
            await asyncio.wait({self._tail}, timeout=left)

    async def send(self, event: Mapping[str, object]) -> bool:
        """Run the hook with ``event`` and send it to the notification services of
        its kind; True when the hook exited 0. Never raises (but cancellation, which
        also ends the hook's process group)."""
        event = {key: self._secrets.text(value) if isinstance(value, str) else value for key, value in event.items()}
        log.info("alert %s: %s", event.get("event"), event.get("message"))
        task_id = event.get("task_id")
        if self._task_link is not None and event.get("event") in PERSON_EVENTS and isinstance(task_id, int):
            link = self._task_link(task_id)
            if link is not None:
                event["link"] = link
        await self._notifiers.send(event)
        return await self._run_hook(event)

    async def send_hook(self, event: Mapping[str, object]) -> bool:
        """Run the command hook only (``vigil alerts test``); True when it exited 0."""
        event = {key: self._secrets.text(value) if isinstance(value, str) else value for key, value in event.items()}
        return await self._run_hook(event)

    async def _run_hook(self, event: Mapping[str, object]) -> bool:
        if not self._settings.command:
            return False
        self.last_error = None
        payload = json.dumps({**event, "home": str(self._home)}).encode()
        env = {
            **explicit_env(os.environ, self._settings.pass_env),
            "VIGIL_HOME": str(self._home),
            "VIGIL_ALERT_EVENT": str(event.get("event")),
        }
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


def alert_hook(settings: Settings, store: Store | None = None) -> AlertHook:
    """The home's hook, masking the secrets of this process's environment and of
    both ``pass_env`` lists (what the agent and the hook were given); ``store``
    records the notification services' health."""
    names = (*settings.dispatch.pass_env, *settings.alerts.pass_env)

    def link(task_id: int) -> str | None:
        return task_link(settings.serve, task_id)

    secrets = Redactor.from_env(os.environ, names)
    return AlertHook(settings.alerts, settings.home, secrets=secrets, store=store, task_link=link)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
