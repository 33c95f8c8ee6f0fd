"""What a sensor author sees: ``FoundTask``, ``SensorContext``, the ``@sensor`` decorator.

A sensor is a plain ``async def name(ctx: SensorContext) -> list[FoundTask]``. It does
not write to the store: it *returns* what it found and the runner inserts it, in one
transaction with the sensor's state. The decorator only attaches metadata (schedule,
timeout, option parser); nothing is registered by importing a module.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx

from sensors.timing import Schedule, parse_every
from vigil.clock import Clock
from vigil.models import DedupScope, GitHubLink, SensorState, Task, TaskFeedback, TaskStatus

META_ATTR = "__vigil_sensor__"


@dataclass(frozen=True, slots=True)
class FoundTask:
    """A task a sensor found.

    ``key`` is required and identifies what was found (an entry id, a commit, a file);
    the runner stores it as the source key ``"<key_prefix>:<key>"`` (the prefix is the
    sensor's name unless its entry sets ``key_prefix``), so the database drops
    duplicates. ``priority``/``skills`` None mean the sensor entry's defaults
    (``priority`` and ``skills`` in vigil.toml, else 5 and none). ``scheduled_for`` is
    epoch ms (None: now). ``dedup`` ``open``: one open task per key; ``ever``: once.
    ``github``: the GitHub issue it came from, kept on the task.
    """

    key: str
    subject: str
    description: str = ""
    priority: int | None = None
    skills: tuple[str, ...] | None = None
    scheduled_for: int | None = None
    dedup: DedupScope = DedupScope.OPEN
    github: GitHubLink | None = None


class HttpPool:
    """The one ``httpx.AsyncClient`` that runs share, built on first use: building
    its TLS context costs tens of milliseconds, which sensors that never touch the
    network should not pay."""

    def __init__(self, timeout_s: float = 10.0) -> None:
        self._timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                follow_redirects=True,
                timeout=httpx.Timeout(self._timeout_s),
                headers={"User-Agent": "vigil-sensor/0.1"},
            )
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


class QueueView(Protocol):
    """The read-only part of the store a sensor may look at."""

    async def count_by_status(self) -> dict[TaskStatus, int]: ...

    async def active_tasks(self) -> list[Task]: ...

    async def sensor_states(self) -> list[SensorState]: ...

    async def list_tasks(
        self,
        *,
        statuses: Collection[TaskStatus] | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Task]: ...


@dataclass(slots=True)
class SensorContext:
    """Everything one run of a sensor gets.

    ``options``: the sensor's own keys from its ``[[sensors]]`` entry. ``state``: a
    copy of its persisted JSON object; mutate it freely, it is saved only if the run
    succeeds and its tasks are stored (so a cursor never runs ahead of its tasks).
    ``home``: the home folder (relative paths in options are relative to it).
    ``max_tasks``: the per-run cap; tasks beyond it are dropped (counted, logged).
    ``peers``: the names of every configured sensor.
    """

    name: str
    options: Mapping[str, Any]
    state: dict[str, Any]
    clock: Clock
    http_pool: HttpPool
    log: logging.Logger
    home: Path
    queue: QueueView
    schedule: Schedule
    max_tasks: int
    peers: tuple[str, ...] = ()
    warnings: list[str] = field(default_factory=list)
    steps_after_commit: list[Callable[[], None]] = field(default_factory=list)  # after_commit's, in order
    feedback: list[TaskFeedback] = field(default_factory=list)  # report's, in order

    @property
    def http(self) -> httpx.AsyncClient:
        """The shared HTTP client (redirects followed, 10 s timeout per operation)."""
        return self.http_pool.client()

    def warn(self, message: str) -> None:
        """Report a problem that did not fail the run (e.g. a malformed line); it is
        shown as the run's error text while the good tasks are kept."""
        self.log.warning("%s", message)
        self.warnings.append(message)

    def report(self, item: TaskFeedback) -> None:
        """Apply ``item`` to its task together with this run's tasks and state (one
        transaction; not at all when the run fails). Keep in ``state`` what was
        reported, so a later run does not report it again."""
        self.feedback.append(item)

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once this run's tasks and state are committed (e.g. move a
        processed file). Not called when the run fails or its tasks are not stored."""
        self.steps_after_commit.append(callback)


SensorFunc = Callable[[SensorContext], Awaitable[Any]]
OptionParser = Callable[[Mapping[str, Any], Path], object]
F = TypeVar("F", bound=SensorFunc)


@dataclass(frozen=True, slots=True)
class SensorMeta:
    """What ``@sensor`` attaches. ``every``/``cron`` both None: vigil.toml must give a
    schedule (a cron is checked when an entry uses it: only ``sensors.runner`` reads
    cron). ``timeout_ms`` None: ``[sensor_defaults] timeout``. ``options`` validates
    the entry's own keys at start-up (raise ``ValueError`` with a message)."""

    every: str | None = None
    cron: str | None = None
    timeout_ms: int | None = None
    options: OptionParser | None = None
    description: str = ""


def sensor(
    *,
    every: str | None = None,
    cron: str | None = None,
    timeout: str | None = None,
    options: OptionParser | None = None,
) -> Callable[[F], F]:
    """Attach a default schedule (``every="1m"`` or ``cron="0 9 * * *"``), a timeout
    (``"30s"``) and an option parser to a sensor function. Registers nothing."""
    from vigil.durations import parse_duration_ms

    if every and cron:
        raise ValueError("give every or cron, not both")
    if every:
        parse_every(every)  # a bad duration fails here, at import
    timeout_ms = parse_duration_ms(timeout) if timeout else None

    def attach(func: F) -> F:
        doc = (func.__doc__ or "").strip().splitlines()
        meta = SensorMeta(every, cron, timeout_ms, options, doc[0] if doc else "")
        setattr(func, META_ATTR, meta)
        return func

    return attach


def meta_of(func: object) -> SensorMeta:
    """The metadata ``@sensor`` attached, or the defaults for an undecorated function."""
    meta = getattr(func, META_ATTR, None)
    return meta if isinstance(meta, SensorMeta) else SensorMeta()
