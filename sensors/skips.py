"""The runs a sensor did not make, recorded in its state with the reason
(``Store.record_sensor_skip``; the reasons are listed on ``vigil.models.SensorSkip``).

``sensors.runner`` calls these when a tick finds runs missed before it (downtime),
when a failure's back-off pushes the next run out, and when APScheduler reports a
run it did not make. A record that fails is logged, never raised: what did not
happen must not stop what does.
"""

from __future__ import annotations

import logging

from sensors.execution import SensorReport
from sensors.spec import SensorSpec
from vigil.models import SensorSkip, SensorState
from vigil.store import Store

log = logging.getLogger("vigil.sensors")


async def record_skip(store: Store, name: str, skip: SensorSkip) -> None:
    try:
        await store.record_sensor_skip(name, skip)
    except Exception as err:
        log.warning("sensor %s: recording a skipped run failed: %s", name, err)


async def record_runs(store: Store, spec: SensorSpec, reason: str, first: int, through: int) -> None:
    """Record the runs of ``spec`` due in ``[first, through]`` (epoch ms) as skipped
    for ``reason``; ``first`` is a run's due time."""
    schedule = spec.schedule
    if schedule.cron is not None:
        first = schedule.next_after(first - 1)  # a persisted due time may carry jitter
    runs = schedule.runs_between(first, through)
    if runs:
        every = schedule.every_ms
        last = first + (runs - 1) * every if every else schedule.occurrence_at_or_before(through)
        await record_skip(store, spec.name, SensorSkip(reason, first, last, runs))


async def record_missed(store: Store, spec: SensorSpec, state: SensorState | None, due: int, *, through: int) -> None:
    """Record as skipped (downtime) the runs due from ``due`` up to ``through``
    that are not recorded yet. A sensor that never ran has missed nothing."""
    if state is None or state.last_run_at is None:
        return
    first = due
    if state.skips and state.skips[-1].last_at >= first:
        first = spec.schedule.next_after(state.skips[-1].last_at)
    await record_runs(store, spec, "downtime", first, through)


async def record_backoff(store: Store, spec: SensorSpec, report: SensorReport) -> None:
    """A failure pushes the next run to ``report.next_due_at``: the runs that would
    have come before it are skipped (backoff)."""
    await record_runs(store, spec, "backoff", spec.schedule.next_after(report.started_at), report.next_due_at - 1)
