"""One run of one sensor: call it under its timeout, check what it returned, cap it,
and record the tasks and the run in one transaction.

This is the only code path for a run, whether the scheduler fired it or a person
typed ``vigil sensors run``. Nothing a sensor does can escape it: an exception, a
timeout, a wrong return value or unserialisable state becomes a recorded error
(status ``error`` or ``timeout``) and the other sensors are untouched. Returned items
are checked only up to the per-run cap, so a runaway sensor returning 100,000 tasks
costs a slice, not a scan; the excess is logged and counted in ``dropped_last``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sensors.api import FoundTask, HttpPool, SensorContext
from sensors.spec import SensorSpec
from sensors.timing import next_due
from vigil.clock import Clock
from vigil.durations import time_problem
from vigil.home import missing_skills_problem
from vigil.models import (
    DEFAULT_PRIORITY,
    MAX_PRIORITY,
    MIN_PRIORITY,
    DedupScope,
    GitHubLink,
    NewTask,
    SensorRun,
    SensorState,
    Task,
    TaskFeedback,
    TaskStatus,
)
from vigil.store import Store

MAX_ERROR_CHARS = 1000
MAX_KEY_CHARS = 1000

log = logging.getLogger("vigil.sensors")


@dataclass(frozen=True)
class SensorReport:
    """What one run did. ``status``: ``ok``, ``error`` or ``timeout``. ``error`` is the
    failure, or for an ok run its warnings (None: none). Times in epoch ms."""

    name: str
    status: str
    created_ids: tuple[int, ...]
    ignored: int
    dropped: int
    error: str | None
    started_at: int
    duration_ms: int
    next_due_at: int
    rejected: int = 0  # refused by a flood limit ([limits] in vigil.toml)

    @property
    def created(self) -> int:
        return len(self.created_ids)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class SensorFailed(Exception):
    """A run that cannot be stored; the message is the run's error text."""


class ReadOnlyQueue:
    """The store seen through ``QueueView``: reads only, whatever a sensor tries."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def count_by_status(self) -> dict[TaskStatus, int]:
        return await self._store.count_by_status()

    async def active_tasks(self) -> list[Task]:
        return await self._store.active_tasks()

    async def sensor_states(self) -> list[SensorState]:
        return await self._store.sensor_states()

    async def list_tasks(
        self,
        *,
        statuses: Collection[TaskStatus] | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Task]:
        return await self._store.list_tasks(statuses=statuses, limit=limit, before_id=before_id)


@dataclass(frozen=True)
class RunEnv:
    """What every run shares: the store, the clock, the HTTP client, the home."""

    store: Store
    clock: Clock
    http: HttpPool
    home: Path
    max_backoff_ms: int
    peers: tuple[str, ...]


def one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_ERROR_CHARS else flat[: MAX_ERROR_CHARS - 1] + "…"


def to_store_tasks(spec: SensorSpec, result: object) -> tuple[list[NewTask], int]:
    """Check and convert what a sensor returned; keeps the first ``spec.max_tasks``.

    Returns the tasks and how many were dropped. Raises ``SensorFailed`` naming the
    first bad item: nothing of a bad result is stored.
    """
    if not isinstance(result, list | tuple):
        raise SensorFailed(f"returned {type(result).__name__}, expected a list of FoundTask")
    kept: Sequence[Any] = result[: spec.max_tasks]
    tasks = [_convert(spec, index, item) for index, item in enumerate(kept)]
    return tasks, len(result) - len(kept)


def _check_skills(tasks: Sequence[NewTask], skills_dir: Path) -> None:
    """Raise ``SensorFailed`` naming the first task whose skills are not all in the
    home: queued, it would only fail at once; as the sensor's error, a person sees
    the typo where it is (nothing of the run is stored)."""
    checked: set[str] = set()
    for task in tasks:
        if set(task.skills) <= checked:
            continue  # most runs repeat the entry's default skills: look them up once
        problem = missing_skills_problem(skills_dir, task.skills)
        if problem is not None:
            raise SensorFailed(f"task with key {task.source_key!r}: {problem}")
        checked.update(task.skills)


def _convert(spec: SensorSpec, index: int, item: Any) -> NewTask:
    if not isinstance(item, FoundTask):
        raise SensorFailed(f"item {index} is {type(item).__name__}, expected sensors.FoundTask")
    if not isinstance(item.key, str) or not item.key.strip():
        raise SensorFailed(f"item {index}: empty key")
    if len(item.key) > MAX_KEY_CHARS:
        raise SensorFailed(f"item {index}: key longer than {MAX_KEY_CHARS} characters")
    if not isinstance(item.subject, str) or not item.subject.strip():
        raise SensorFailed(f"item {index} (key {item.key!r}): empty subject")
    if not isinstance(item.description, str):
        raise SensorFailed(f"item {index} (key {item.key!r}): description is not text")
    priority = item.priority if item.priority is not None else spec.priority or DEFAULT_PRIORITY
    if isinstance(priority, bool) or not isinstance(priority, int) or not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise SensorFailed(f"item {index} (key {item.key!r}): priority must be {MIN_PRIORITY}-{MAX_PRIORITY}")
    skills = item.skills if item.skills is not None else spec.skills or ()
    if not isinstance(skills, list | tuple) or not all(isinstance(s, str) and s.strip() for s in skills):
        raise SensorFailed(f"item {index} (key {item.key!r}): skills must be a list of names")
    when = item.scheduled_for
    if when is not None and (problem := time_problem(when)) is not None:
        raise SensorFailed(f"item {index} (key {item.key!r}): scheduled_for {problem}")
    try:
        dedup = DedupScope(item.dedup)
    except ValueError:
        raise SensorFailed(f"item {index} (key {item.key!r}): dedup must be 'open' or 'ever'") from None
    return NewTask(
        subject=item.subject,
        description=item.description,
        priority=priority,
        skills=tuple(skills),
        source=f"sensor:{spec.name}",
        source_key=spec.source_key(item.key),
        dedup=dedup,
        scheduled_for=when,
        github=item.github if isinstance(item.github, GitHubLink) else None,
    )


@dataclass(frozen=True)
class SensorResult:
    """What one call of a sensor came to, before it is recorded. ``status``: ``ok``,
    ``error`` or ``timeout``; ``tasks`` checked and capped (none unless ok),
    ``dropped`` past the cap; ``state`` to keep (None: unchanged); ``error`` the
    failure, or an ok run's warnings; ``feedback`` what it reported on tasks
    (none unless ok); ``after_commit`` the steps the sensor asked for once its
    tasks are stored. ``started_at`` epoch ms."""

    status: str
    tasks: tuple[NewTask, ...]
    dropped: int
    state: dict[str, Any] | None
    error: str | None
    after_commit: tuple[Callable[[], None], ...]
    started_at: int
    duration_ms: int
    feedback: tuple[TaskFeedback, ...] = ()


async def execute(
    spec: SensorSpec, env: RunEnv, prev: SensorState | None, *, next_fire_at: int | None = None
) -> SensorReport:
    """Run ``spec`` once and record it. ``next_fire_at``: when its scheduler fires it
    next (epoch ms), the next due time of a successful run; None: computed from this
    run. Never raises for anything the sensor does; raises only ``CancelledError``
    (shutdown)."""
    return await _record(spec, env, prev, await run_sensor(spec, env, prev), next_fire_at)


async def run_sensor(spec: SensorSpec, env: RunEnv, prev: SensorState | None) -> SensorResult:
    """Call ``spec``'s sensor under its timeout and check what it returned (its
    state as ``prev`` left it). Never raises for anything the sensor does."""
    logger = logging.getLogger(f"vigil.sensors.{spec.name}")
    started = env.clock.now_ms()
    t0 = time.perf_counter()
    ctx = SensorContext(
        name=spec.name,
        options=spec.options,
        state=json.loads(json.dumps(prev.state)) if prev else {},
        clock=env.clock,
        http_pool=env.http,
        log=logger,
        home=env.home,
        queue=ReadOnlyQueue(env.store),
        schedule=spec.schedule,
        max_tasks=spec.max_tasks,
        peers=env.peers,
    )
    tasks: list[NewTask] = []
    dropped = 0
    state: dict[str, Any] | None = None
    status, error = "ok", None
    deadline = asyncio.timeout(spec.timeout_ms / 1000)
    try:
        async with deadline:
            result = await spec.func(ctx)
        tasks, dropped = to_store_tasks(spec, result)
        _check_skills(tasks, env.home / "skills")
        state = _json_copy(ctx.state)
    except TimeoutError as err:
        status = "timeout" if deadline.expired() else "error"
        error = f"timed out after {spec.timeout_ms / 1000:g}s" if deadline.expired() else _describe(err)
    except SensorFailed as err:
        status, error = "error", str(err)
    except (Exception, SystemExit) as err:  # a sensor must never take the process down
        status, error = "error", _describe(err)
        # The traceback only where logging is configured to show it; one line below.
        logger.info("sensor %s traceback", spec.name, exc_info=True)
    if status != "ok":
        logger.warning("sensor %s failed (%s): %s", spec.name, status, error)
        tasks, dropped, state = [], 0, None
    elif dropped:
        total = dropped + len(tasks)
        ctx.warn(f"returned {total} tasks; kept the first {len(tasks)} (max_tasks_per_run), dropped {dropped}")
    if status == "ok" and ctx.warnings:
        error = "; ".join(ctx.warnings)
    duration_ms = int((time.perf_counter() - t0) * 1000)
    steps = tuple(ctx.steps_after_commit)
    feedback = tuple(ctx.feedback) if status == "ok" else ()
    return SensorResult(status, tuple(tasks), dropped, state, error, steps, started, duration_ms, feedback)


def _json_copy(state: object) -> dict[str, Any]:
    """A copy of the sensor's state that is known to survive JSON."""
    if not isinstance(state, dict):
        raise SensorFailed(f"state must stay a dict, got {type(state).__name__}")
    try:
        copy: dict[str, Any] = json.loads(json.dumps(state))
    except (TypeError, ValueError) as err:
        raise SensorFailed(f"state is not JSON-serialisable: {err}") from None
    return copy


def _describe(err: BaseException) -> str:
    text = str(err)
    return one_line(f"{type(err).__name__}: {text}" if text else type(err).__name__)


async def _record(
    spec: SensorSpec, env: RunEnv, prev: SensorState | None, result: SensorResult, next_fire_at: int | None
) -> SensorReport:
    """Store ``result``'s tasks, its feedback and the run in one transaction; then, for an ok run
    whose tasks were all stored, its after-commit steps."""
    started, duration_ms, status = result.started_at, result.duration_ms, result.status
    failures = 0 if status == "ok" else (prev.consecutive_failures if prev else 0) + 1
    due = next_due(spec.schedule, started, failures, env.max_backoff_ms, started)
    if failures == 0 and next_fire_at is not None:
        due = next_fire_at
    error = result.error and one_line(result.error)
    run = SensorRun(started, duration_ms, status, error, due, failures, result.dropped)
    try:
        batch = await env.store.record_sensor_run(
            spec.name, run, list(result.tasks), result.state, list(result.feedback)
        )
    except Exception as err:  # the store refused: record the failure without the tasks
        log.warning("sensor %s: storing its run failed: %s", spec.name, _describe(err))
        failures = (prev.consecutive_failures if prev else 0) + 1
        due = next_due(spec.schedule, started, failures, env.max_backoff_ms, started)
        error = f"could not store its tasks: {_describe(err)}"
        run = SensorRun(started, duration_ms, "error", error, due, failures, 0)
        try:
            await env.store.record_sensor_run(spec.name, run, [], None)
        except Exception:
            log.warning("sensor %s: recording its failure failed too", spec.name)
        return SensorReport(spec.name, "error", (), 0, 0, error, started, duration_ms, due)
    if status == "ok" and batch.rejected:
        # A flood limit refused some tasks, and which ones is not known here: skip the
        # after-commit steps (an inbox file stays put) rather than act on a lost task.
        log.warning("sensor %s: %d task(s) refused by a flood limit", spec.name, batch.rejected)
    elif status == "ok":
        _after_commit(spec.name, result.after_commit)
    created, ignored = batch.created_ids, batch.ignored
    return SensorReport(
        spec.name, status, created, ignored, result.dropped, error, started, duration_ms, due, batch.rejected
    )


def _after_commit(name: str, callbacks: Sequence[Callable[[], None]]) -> None:
    for callback in callbacks:
        try:
            callback()
        except Exception as err:
            log.warning("sensor %s: after-commit step failed: %s", name, _describe(err))
