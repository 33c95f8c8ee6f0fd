"""``SensorRunner``: one APScheduler job per sensor, in the daemon's event loop.

The only module that imports APScheduler (3.x, ``AsyncIOScheduler``). APScheduler
provides the job machinery — ``max_instances=1`` (a slow sensor never overlaps
itself), ``coalesce`` (missed runs collapse into one), a misfire grace and jitter —
while *when* a sensor is due is decided by ``sensors.timing`` from the state persisted
in the store. After each run the job is moved to the sensor's next due time (which
includes back-off), so:

* a restart fires only the sensors that are actually due (last runs persist);
* a sensor that another process ran meanwhile (``vigil sensors run``, a second
  runner on the same database) is skipped until it is due again;
* ``vigil sensors disable NAME`` takes effect at the sensor's next tick.

Every run, scheduled or ``run_now``, goes through ``sensors.execution.execute``.

APScheduler fires on the wall clock while due times are in the runner's clock, so
every time handed to it goes through ``vigil.clock.wall_ms`` (and jitter through
``real_seconds``): under an accelerated clock a 60 s sensor fires every 60/k real
seconds. The misfire grace stays real: it is about how late the event loop runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger

from sensors.api import HttpPool
from sensors.config import SensorSpec
from sensors.execution import RunEnv, SensorReport, execute
from sensors.timing import Schedule, next_due
from vigil.clock import Clock, clock_ms, real_seconds, wall_ms
from vigil.config import Settings
from vigil.errors import InputError
from vigil.models import SensorState
from vigil.store import Store

log = logging.getLogger("vigil.sensors")

RUN_NOW_CONCURRENCY = 32  # sensors run at once by run_now; they mostly wait on I/O
DUE_TOLERANCE_MS = 50  # a tick this early still counts as due (clock rounding)


class _NominalTrigger(BaseTrigger):  # type: ignore[misc]
    """Fires at the schedule's next nominal time after ``now``. Only a fallback: each
    run moves its job to the real next due time (with back-off) when it ends."""

    __slots__ = ("clock", "jitter", "schedule")

    def __init__(self, schedule: Schedule, jitter_s: float, clock: Clock) -> None:
        self.schedule = schedule
        self.jitter = jitter_s  # real seconds
        self.clock = clock

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        now_ms = clock_ms(self.clock, int(now.timestamp() * 1000))  # ``now`` is the wall clock
        if self.schedule.cron is not None:
            nominal = self.schedule.cron.next_after(now_ms)
        else:
            nominal = now_ms + (self.schedule.every_ms or 60_000)
        fire_at = _to_datetime(wall_ms(self.clock, nominal))
        return self._apply_jitter(fire_at, self.jitter, now)  # type: ignore[no-any-return]

    def __str__(self) -> str:
        return str(self.schedule)


def _to_datetime(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


class SensorRunner:
    """Runs the configured sensors on their schedules, or on demand.

    ``on_created`` is called (in the event loop) after a run stored at least one new
    task: the dispatcher's in-process wake-up.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        clock: Clock,
        specs: Sequence[SensorSpec],
        *,
        on_created: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock
        self._specs = {spec.name: spec for spec in specs}
        self._on_created = on_created
        self._http: HttpPool | None = None
        self._scheduler: Any = None
        self._inflight: set[asyncio.Task[Any]] = set()

    @property
    def specs(self) -> list[SensorSpec]:
        return list(self._specs.values())

    def due_at(self, spec: SensorSpec, state: SensorState | None, now_ms: int) -> int:
        """When ``spec`` is next due, from its persisted last run and failures (epoch ms)."""
        max_backoff = self._settings.sensor_defaults.max_backoff_ms
        if state is None:
            return next_due(spec.schedule, None, 0, max_backoff, now_ms)
        return next_due(spec.schedule, state.last_run_at, state.consecutive_failures, max_backoff, now_ms)

    def _env(self, http: HttpPool) -> RunEnv:
        return RunEnv(
            store=self._store,
            clock=self._clock,
            http=http,
            home=self._settings.home,
            max_backoff_ms=self._settings.sensor_defaults.max_backoff_ms,
            peers=tuple(self._specs),
        )

    async def _run(self, spec: SensorSpec, env: RunEnv, state: SensorState | None) -> SensorReport:
        report = await execute(spec, env, state)
        if report.created and self._on_created is not None:
            try:
                self._on_created()
            except Exception:
                log.exception("on_created callback failed")
        return report

    # --- on demand ------------------------------------------------------------------
    async def run_now(self, names: Sequence[str] | None = None) -> list[SensorReport]:
        """Run the named sensors (or every enabled one) once, now, concurrently; one
        report per sensor, in the order given. Raises ``InputError`` for an unknown
        name. Disabled sensors run when named explicitly."""
        if names is not None:
            unknown = [n for n in names if n not in self._specs]
            if unknown:
                known = ", ".join(self._specs) or "none configured"
                raise InputError(f"unknown sensor {unknown[0]!r} (sensors: {known})")
        states = {s.name: s for s in await self._store.sensor_states()}
        if names is None:
            chosen = [s for s in self._specs.values() if s.enabled and _enabled(states.get(s.name))]
        else:
            chosen = [self._specs[n] for n in dict.fromkeys(names)]
        return await self._run_many(chosen, states)

    async def run_due(self) -> list[SensorReport]:
        """Run every enabled sensor that is due at the clock's now (its persisted last
        run and back-off decide), once. What a scheduler tick does, for all sensors."""
        states = {s.name: s for s in await self._store.sensor_states()}
        now = self._clock.now_ms()
        chosen = [
            spec
            for spec in self._specs.values()
            if spec.enabled
            and _enabled(states.get(spec.name))
            and self.due_at(spec, states.get(spec.name), now) <= now + DUE_TOLERANCE_MS
        ]
        return await self._run_many(chosen, states)

    async def _run_many(self, chosen: Sequence[SensorSpec], states: dict[str, SensorState]) -> list[SensorReport]:
        own_client = self._http is None
        http = self._http or HttpPool()
        gate = asyncio.Semaphore(RUN_NOW_CONCURRENCY)
        env = self._env(http)

        async def one(spec: SensorSpec) -> SensorReport:
            async with gate:
                return await self._run(spec, env, states.get(spec.name))

        try:
            return list(await asyncio.gather(*(one(spec) for spec in chosen)))
        finally:
            if own_client:
                await http.aclose()

    # --- scheduled ----------------------------------------------------------------
    async def start(self) -> None:
        """Add one job per enabled sensor and start the scheduler in this event loop."""
        if self._scheduler is not None:
            return
        defaults = self._settings.sensor_defaults
        quiet = logging.getLogger("apscheduler")
        if quiet.level == logging.NOTSET:  # unless configured: its two INFO lines per run drown the log
            quiet.setLevel(logging.WARNING)
        self._http = HttpPool()
        scheduler = AsyncIOScheduler(timezone=UTC)
        states = {s.name: s for s in await self._store.sensor_states()}
        now = self._clock.now_ms()
        for spec in self._specs.values():
            if not spec.enabled:
                continue
            first = max(self.due_at(spec, states.get(spec.name), now), now) + self._jitter_ms()
            scheduler.add_job(
                self._tick,
                _NominalTrigger(spec.schedule, real_seconds(self._clock, defaults.jitter_ms), self._clock),
                args=(spec.name,),
                id=spec.name,
                name=f"sensor {spec.name}",
                max_instances=1,
                coalesce=True,
                misfire_grace_time=max(1, defaults.misfire_grace_ms // 1000),
                next_run_time=_to_datetime(wall_ms(self._clock, first)),
            )
        scheduler.start()
        self._scheduler = scheduler

    async def stop(self) -> None:
        """Stop scheduling, cancel runs in flight and wait for them, close the client."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        inflight = list(self._inflight)
        for task in inflight:
            task.cancel()
        await asyncio.gather(*inflight, return_exceptions=True)
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    def _jitter_ms(self) -> int:
        return int(random.uniform(0, self._settings.sensor_defaults.jitter_ms))

    def _reschedule(self, name: str, at_ms: int) -> None:
        if self._scheduler is None:
            return
        at = max(at_ms, self._clock.now_ms()) + self._jitter_ms()
        with contextlib.suppress(JobLookupError):  # stopped meanwhile
            self._scheduler.modify_job(name, next_run_time=_to_datetime(wall_ms(self._clock, at)))

    async def _tick(self, name: str) -> None:
        """The job of one sensor: run it if it is due and enabled, then move the job
        to its next due time."""
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        spec = self._specs[name]
        try:
            state = await self._store.sensor_state(name)
            now = self._clock.now_ms()
            due = self.due_at(spec, state, now)
            if not _enabled(state):
                self._reschedule(name, now + spec.schedule.gap_ms(now))
            elif due > now + DUE_TOLERANCE_MS:
                self._reschedule(name, due)  # another process ran it meanwhile
            elif self._http is not None:
                report = await self._run(spec, self._env(self._http), state)
                self._reschedule(name, report.next_due_at)
        except asyncio.CancelledError:
            return  # stop() asked; the job ends quietly instead of logging a traceback
        except Exception:
            log.exception("sensor %s: tick failed", name)  # e.g. the store is busy: try again later
            now = self._clock.now_ms()
            self._reschedule(name, now + spec.schedule.gap_ms(now))
        finally:
            if task is not None:
                self._inflight.discard(task)


def _enabled(state: SensorState | None) -> bool:
    return state is None or state.enabled
