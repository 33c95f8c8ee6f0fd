"""``SensorRuns``: running the configured sensors once, now or when due.

What a scheduler tick does for one sensor (``consider``) and the on-demand form,
``run_now`` (``vigil sensors run``). ``sensors.runner.SensorRunner`` adds the
scheduler.
Every run goes through ``sensors.execution.execute``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from sensors.api import HttpPool
from sensors.execution import RunEnv, SensorReport, execute
from sensors.skips import record_backoff, record_missed, record_skip
from sensors.spec import SensorSpec
from sensors.timing import due_at
from vigil.clock import Clock
from vigil.config import Settings
from vigil.errors import InputError
from vigil.models import SensorSkip, SensorState
from vigil.store import Store

log = logging.getLogger("vigil.sensors")

RUN_NOW_CONCURRENCY = 32  # sensors run at once by run_now; they mostly wait on I/O
DUE_TOLERANCE_MS = 50  # a tick this early still counts as due (clock rounding)


class SensorRuns:
    """Runs the configured sensors once: now, or those that are due.

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
        self._http: HttpPool | None = None  # the scheduler's shared client while it runs
        self._since = clock.now_ms()  # when it started: a sensor that never ran is due from then

    @property
    def specs(self) -> list[SensorSpec]:
        return list(self._specs.values())

    def due_at(self, spec: SensorSpec, state: SensorState | None) -> int:
        """When ``spec`` is next due (epoch ms), for this runner (``timing.due_at``)."""
        return due_at(spec.schedule, state, self._settings.sensor_defaults.max_backoff_ms, self._since)

    def run_env(self, http: HttpPool) -> RunEnv:
        """What every run of these sensors shares, with ``http`` as its client."""
        return RunEnv(
            store=self._store,
            clock=self._clock,
            http=http,
            home=self._settings.home,
            max_backoff_ms=self._settings.sensor_defaults.max_backoff_ms,
            peers=tuple(self._specs),
        )

    async def _run(
        self, spec: SensorSpec, env: RunEnv, state: SensorState | None, next_fire_at: int | None = None
    ) -> SensorReport:
        report = await execute(spec, env, state, next_fire_at=next_fire_at)
        if not report.ok:
            await record_backoff(self._store, spec, report)
        if report.created and self._on_created is not None:
            try:
                self._on_created()
            except Exception:
                log.exception("on_created callback failed")
        return report

    async def consider(self, spec: SensorSpec, env: RunEnv, next_fire_at: int | None) -> SensorReport | None:
        """One tick of ``spec``: run it if it is enabled and due (after recording the
        runs missed before), else record why not. ``next_fire_at``: when the
        scheduler fires it next (epoch ms). None: not run."""
        state = await self._store.sensor_state(spec.name)
        now = self._clock.now_ms()
        if not _enabled(state):
            turn = self.turn(spec, now)
            await record_skip(self._store, spec.name, SensorSkip("disabled", turn, turn))
            return None
        if self.due_at(spec, state) > now + DUE_TOLERANCE_MS:
            return None  # another process ran it for this turn, or it backs off (recorded then)
        previous = self.turn(spec, now) - (spec.schedule.every_ms or 1)  # the run before this one
        await record_missed(self._store, spec, state, self.due_at(spec, state), through=previous)
        return await self._run(spec, env, state, next_fire_at)

    def turn(self, spec: SensorSpec, now_ms: int) -> int:
        """The run a tick at ``now_ms`` stands for: a cron's occurrence, an interval's now."""
        if spec.schedule.cron is None:
            return now_ms
        return spec.schedule.occurrence_at_or_before(now_ms + DUE_TOLERANCE_MS)

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
        # concurrently, at most RUN_NOW_CONCURRENCY at a time, sharing one HTTP client
        own_client = self._http is None
        http = self._http or HttpPool()
        gate = asyncio.Semaphore(RUN_NOW_CONCURRENCY)
        env = self.run_env(http)

        async def bounded(spec: SensorSpec) -> SensorReport:
            async with gate:
                return await self._run(spec, env, states.get(spec.name))

        try:
            return list(await asyncio.gather(*(bounded(spec) for spec in chosen)))
        finally:
            if own_client:
                await http.aclose()


def _enabled(state: SensorState | None) -> bool:
    return state is None or state.enabled
