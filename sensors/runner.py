"""``SensorRunner``: the sensors' scheduler, one APScheduler job per sensor.

The only module that imports APScheduler (3.x, ``AsyncIOScheduler`` in the daemon's
event loop), so it also parses schedules (``parse_schedule``). Each sensor's job
fires on an APScheduler trigger: an ``IntervalTrigger`` with its jitter for
``every``, a ``CronTrigger`` read in the entry's time zone for ``cron``
(``_Crontab``); each fire is a tick (``SensorRuns.consider``). APScheduler also keeps each job's rhythm
(nothing moves a job by hand) and applies its options: ``max_instances=1`` (a slow
sensor never overlaps itself), ``coalesce`` (runs missed while the process slept
collapse into one) and a misfire grace that is the sensor's ``catch_up``: none for
``once`` (a late run still happens, once), ``[sensor_defaults] misfire_grace`` for
``skip`` (a run later than that is not made).

What must survive a restart is in the store (``sensor_state``): the last run, the
next due time, the failures in a row (back-off) and the runs skipped. At start a
job whose persisted due time is ahead fires on its trigger; one that fell due while
no process ran the sensor is handed to APScheduler as the latest run that was due,
and the misfire grace decides whether it is made. Each tick re-reads the state, so
a sensor that another process ran meanwhile (``vigil sensors run``, a second runner
on the same database) is not run twice for one turn, ``vigil sensors disable``
takes effect at the next tick, and a failing sensor's ticks do nothing until its
back-off ends.

Every run not made is recorded in the sensor's state (``sensors.skips``) with its
reason: ``downtime`` (due while no process ran it, or too late for its
``catch_up``), ``disabled``, ``backoff`` (recorded when the failure pushes the next
run out) and ``busy`` (its previous run was still going, which APScheduler reports
here, as it reports a run too late for its misfire grace).

Simulated time: APScheduler fires on the wall clock while due times are in the
runner's clock, so every time handed to it goes through ``vigil.clock.wall_ms``
(intervals and jitter through ``real_seconds``) and cron times are computed on the
runner's clock. Under an accelerated clock a 60 s sensor fires every 60/k real
seconds. The misfire grace stays real: it is about how late the event loop runs.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from sensors.api import HttpPool
from sensors.cron import FIELDS, CronError, crontab_fields
from sensors.runs import SensorRuns
from sensors.skips import record_missed, record_skip
from sensors.spec import SensorSpec
from sensors.timing import Schedule, parse_every
from vigil.clock import Clock, clock_ms, real_seconds, wall_ms
from vigil.config import Settings
from vigil.models import SensorSkip
from vigil.store import Store

log = logging.getLogger("vigil.sensors")

_MS = timedelta(milliseconds=1)
_SECOND = timedelta(seconds=1)
_CHANGE = timedelta(hours=3)  # the largest change of a zone's offset looked around (DST: 1 h)
_FIELD_LABELS = dict(zip(FIELDS, ("minute", "hour", "day of month", "month", "day of week"), strict=True))


def parse_schedule(every: str | None, cron: str | None, timezone: str | None = None) -> Schedule:
    """Build a schedule from the text of ``every`` or ``cron`` (read in ``timezone``,
    UTC by default); raises ``ValueError`` with a message naming the key."""
    if every and cron:
        raise ValueError("give every or cron, not both")
    if every:
        return parse_every(every)
    if not cron:
        raise ValueError("no schedule: set every or cron")
    zone = _zone(timezone)
    try:
        fields = crontab_fields(cron)
        triggers = [_cron_trigger(f) for f in fields]
        crontab = _Crontab(triggers, zone, every_hour=fields[0]["hour"] == "*")
    except CronError as err:
        raise ValueError(f"cron {cron!r}: {err}") from None
    if crontab.get_next_fire_time(None, datetime.now(UTC)) is None:
        raise ValueError(f"cron {cron!r}: never matches")
    return Schedule(cron=cron, tz=zone, trigger=crontab)


def _zone(name: str | None) -> tzinfo:
    if name is None or name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"timezone: unknown time zone {name!r}") from None


def _cron_trigger(fields: dict[str, str]) -> CronTrigger:
    """A trigger of the wall times ``fields`` match: on UTC, where each comes once."""
    for name, text in fields.items():  # one at a time, so that the message names the field
        try:
            CronTrigger(**{name: text}, timezone=UTC)
        except ValueError as err:
            reason = re.sub(r"^Error validating expression '[^']*': ", "", str(err))
            raise CronError(f"{_FIELD_LABELS[name]} {text!r}: {reason}") from None
    return CronTrigger(**fields, timezone=UTC)


class _Crontab(BaseTrigger):  # type: ignore[misc]
    """A classic cron expression in a time zone. APScheduler's ``CronTrigger`` finds
    the matching wall times, on a calendar without daylight saving (UTC, so each wall
    time comes exactly once); ``zoneinfo`` then gives the moment each happens in the
    zone (``_moments``):

    * a wall time that comes twice (clocks go back) fires at its first moment, and a
      schedule for every hour (``*`` in the hour field) also at its second, so that
      it keeps its rhythm through the repeated hour;
    * a wall time that does not exist (clocks go forward) fires as long after the
      jump as it was after the gap's start (02:30 → 03:30), once.

    ``CronTrigger`` in the zone itself does neither: APScheduler 3.11 fires both
    passes of the repeated hour whatever the hour field, fires only the first
    missing time of the gap, and adds jitter to the wall time, which in the
    repeated hour drops the second pass's ``fold`` and moves the time an hour back.
    Here jitter is added to the moment, in UTC. Either of ``triggers`` fires
    (``sensors.cron``: both day fields restricted). With ``clock`` (an accelerated
    clock) times are computed on it and handed to APScheduler on the wall clock.
    """

    __slots__ = ("clock", "every_hour", "jitter", "triggers", "zone")

    def __init__(
        self,
        triggers: Sequence[CronTrigger],
        zone: tzinfo,
        *,
        every_hour: bool,
        jitter_s: float | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.triggers = tuple(triggers)
        self.zone = zone
        self.every_hour = every_hour
        self.jitter = jitter_s
        self.clock = clock

    def with_jitter_on(self, jitter_s: float | None, clock: Clock) -> _Crontab:
        """The same expression for a job: with jitter (real seconds), on ``clock``."""
        return _Crontab(self.triggers, self.zone, every_hour=self.every_hour, jitter_s=jitter_s, clock=clock)

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        after = self._on_clock(now)
        if previous_fire_time is not None:  # as CronTrigger: the runs after the last one, missed ones too
            after = min(after, self._on_clock(previous_fire_time) + _MS)
        fire = self._first_moment(after)
        if fire is None:
            return None
        if self.clock is not None:
            fire = _datetime(wall_ms(self.clock, _ms(fire)))
        return self._apply_jitter(fire, self.jitter, now)  # type: ignore[no-any-return]

    def _first_moment(self, after: datetime) -> datetime | None:
        """The first moment at or after ``after`` at which a matching wall time happens."""
        first = self._scan(after, self._wall(after), None)
        if first is None or self._offset(after - _CHANGE) == self._offset(first + _CHANGE):
            return first
        # Near a change of offset, wall times and their moments are not in the same
        # order (after 03:00 comes the gap's 02:30, which is 03:30): look around.
        return self._scan(after, self._wall(after) - _CHANGE, self._wall(first) + _CHANGE)

    def _scan(self, after: datetime, wall: datetime, until: datetime | None) -> datetime | None:
        """The earliest moment at or after ``after`` of the matching wall times from
        ``wall`` on: up to the first that has one, or up to ``until``."""
        best: datetime | None = None
        found = self._next_wall(wall)
        while found is not None and (best is None or (until is not None and found <= until)):
            for moment in self._moments(found):
                if moment >= after and (best is None or moment < best):
                    best = moment
            found = self._next_wall(found + _SECOND)
        return best

    def _next_wall(self, wall: datetime) -> datetime | None:
        times = (trigger.get_next_fire_time(None, wall) for trigger in self.triggers)
        return min((t for t in times if t is not None), default=None)

    def _moments(self, wall: datetime) -> set[datetime]:
        """When the wall time ``wall`` (held as UTC) happens in the zone (see above)."""
        local = wall.replace(tzinfo=self.zone)
        folds = (0, 1) if self.every_hour else (0,)
        return {local.replace(fold=fold).astimezone(UTC) for fold in folds}

    def _wall(self, moment: datetime) -> datetime:
        return moment.astimezone(self.zone).replace(tzinfo=UTC, fold=0)

    def _offset(self, moment: datetime) -> timedelta | None:
        return moment.astimezone(self.zone).utcoffset()

    def _on_clock(self, moment: datetime) -> datetime:
        return moment if self.clock is None else _datetime(clock_ms(self.clock, _ms(moment)))

    def __str__(self) -> str:
        return " or ".join(str(trigger) for trigger in self.triggers)


def _datetime(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


class SensorRunner(SensorRuns):
    """Runs the configured sensors on their schedules (``start``/``stop``), or on
    demand (``SensorRuns``).

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
        super().__init__(store, settings, clock, specs, on_created=on_created)
        self._scheduler: Any = None
        self._inflight: set[asyncio.Task[Any]] = set()

    def _on_not_run(self, event: JobEvent) -> None:
        """APScheduler did not run a job: too late for its misfire grace (the event
        loop or the machine slept, or the run fell due while no process ran it), or
        its previous run was still going. Called in the event loop."""
        spec = self._specs.get(event.job_id)
        if spec is None:
            return
        if event.code == EVENT_JOB_MISSED:
            at = clock_ms(self._clock, _ms(event.scheduled_run_time))
            self._spawn(self._missed(spec, at))
        else:
            for fired in event.scheduled_run_times:
                turn = self.turn(spec, clock_ms(self._clock, _ms(fired)))
                self._spawn(record_skip(self._store, spec.name, SensorSkip("busy", turn, turn)))

    async def _missed(self, spec: SensorSpec, at: int) -> None:
        try:
            state = await self._store.sensor_state(spec.name)
        except Exception as err:  # e.g. the store is busy: the sensor's next tick records them
            log.warning("sensor %s: reading its state to record a missed run failed: %s", spec.name, err)
            return
        await record_missed(self._store, spec, state, self.due_at(spec, state), through=at)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    # --- scheduled ----------------------------------------------------------------
    async def start(self) -> None:
        """Add one job per enabled sensor and start the scheduler in this event loop."""
        if self._scheduler is not None:
            return
        quiet = logging.getLogger("apscheduler")
        if quiet.level == logging.NOTSET:  # unless configured: its two INFO lines per run drown the log
            quiet.setLevel(logging.WARNING)
        self._http = HttpPool()
        scheduler = AsyncIOScheduler(timezone=UTC)
        states = {s.name: s for s in await self._store.sensor_states()}
        now = self._since = self._clock.now_ms()
        for spec in self._specs.values():
            if not spec.enabled:
                continue
            due = self.due_at(spec, states.get(spec.name))
            # Ahead: the trigger fires it. Fallen due while no process ran it: the
            # latest run that was due goes to APScheduler, whose misfire grace (the
            # sensor's catch_up) decides whether it is made.
            late = None if due > now else self._latest(spec, due, now)
            first = {} if late is None else {"next_run_time": _datetime(wall_ms(self._clock, late))}
            scheduler.add_job(
                self._tick,
                self._trigger(spec, start_ms=due if late is None else late),
                args=(spec.name,),
                id=spec.name,
                name=f"sensor {spec.name}",
                max_instances=1,
                coalesce=True,
                misfire_grace_time=self._misfire_grace_s(spec),
                **first,
            )
        scheduler.add_listener(self._on_not_run, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)
        scheduler.start()
        self._scheduler = scheduler

    def _latest(self, spec: SensorSpec, due: int, now: int) -> int:
        """The latest run at or before ``now`` of those due since ``due``."""
        every = spec.schedule.every_ms
        if every is None:
            return spec.schedule.occurrence_at_or_before(now)
        return due + (now - due) // every * every

    def _trigger(self, spec: SensorSpec, *, start_ms: int) -> BaseTrigger:
        """The job's APScheduler trigger, on the wall clock; an interval counts from
        ``start_ms``."""
        jitter_s = real_seconds(self._clock, self._settings.sensor_defaults.jitter_ms) or None
        schedule = spec.schedule
        if isinstance(schedule.trigger, _Crontab):
            return schedule.trigger.with_jitter_on(jitter_s, self._clock)
        return IntervalTrigger(
            seconds=real_seconds(self._clock, schedule.every_ms or 0),
            start_date=_datetime(wall_ms(self._clock, start_ms)),
            timezone=UTC,
            jitter=jitter_s,
        )

    def _misfire_grace_s(self, spec: SensorSpec) -> int | None:
        """APScheduler's misfire grace (real seconds) for the sensor's ``catch_up``:
        a late run is still made, however late (``once``), or only this late."""
        if spec.catch_up == "once":
            return None
        return max(1, self._settings.sensor_defaults.misfire_grace_ms // 1000)

    def _next_fire(self, name: str) -> int | None:
        """When the sensor's job fires next (epoch ms on the runner's clock)."""
        job = None if self._scheduler is None else self._scheduler.get_job(name)
        if job is None or job.next_run_time is None:
            return None
        return clock_ms(self._clock, _ms(job.next_run_time))

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

    async def _tick(self, name: str) -> None:
        """The job of one sensor, which APScheduler calls at each of its fire times."""
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            if self._http is not None:
                await self.consider(self._specs[name], self.run_env(self._http), self._next_fire(name))
        except asyncio.CancelledError:
            return  # stop() asked; the job ends quietly instead of logging a traceback
        except Exception:
            log.exception("sensor %s: tick failed", name)  # e.g. the store is busy: its next tick tries again
        finally:
            if task is not None:
                self._inflight.discard(task)
