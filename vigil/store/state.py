"""Sensor state and the loop's key/value state, written once for every backend.

Blocking, like ``tasks.Tasks``; the async stores run each call whole in their
worker thread (``threaded.AsyncState``). The conditional write of a loop value is each
backend's own (``replace_loop_value`` in its queries module). The guarantees are
those of the ``vigil.store.Store`` protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace

from vigil.clock import Clock
from vigil.config import LimitsSettings
from vigil.faults import crash_point
from vigil.models import BatchResult, NewTask, SensorRun, SensorSkip, SensorState, TaskFeedback
from vigil.store.feedback import apply_feedback
from vigil.store.rows import Row, sensor_state_from_row
from vigil.store.sql.state import (
    LOOP_VALUES,
    RECORD_SENSOR_RUN,
    SENSOR_SKIPS,
    SENSOR_STATE,
    SENSOR_STATES,
    SET_LOOP_VALUE,
    SET_SENSOR_ENABLED,
    SET_SENSOR_SKIPS,
)
from vigil.store.tasks import insert_batch
from vigil.store.transaction import Engine, Tx

MAX_SKIPS = 20  # stretches of skipped runs kept per sensor


def _sensor_state(tx: Tx, row: Row) -> SensorState:
    return sensor_state_from_row(row, dict(tx.loads(row["state"])), tx.loads(row["skips"]))


def merge_skip(skips: Sequence[SensorSkip], skip: SensorSkip, last_run_at: int | None) -> list[SensorSkip]:
    """``skips`` (oldest first) with ``skip`` added: runs already recorded are not
    counted again, a skip for the latest one's reason with no run in between extends
    it, and the latest ``MAX_SKIPS`` are kept."""
    latest = skips[-1] if skips else None
    if latest is not None and skip.last_at <= latest.last_at and skip.first_at >= latest.first_at:
        return list(skips)  # seen already (two processes may both record one run)
    if latest is not None and latest.reason == skip.reason and latest.last_at > (last_run_at or 0):
        merged = replace(latest, last_at=skip.last_at, runs=latest.runs + skip.runs)
        return [*skips[:-1], merged]
    return [*skips, skip][-MAX_SKIPS:]


class State:
    """The sensor-state and loop-state methods of ``Store``, blocking."""

    def __init__(
        self, engine: Engine, clock: Clock, default_max_retries: int, limits: LimitsSettings | None = None
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._default_max_retries = default_max_retries
        self._limits = limits

    def sensor_states(self) -> list[SensorState]:
        """Every sensor's state, by name."""
        return self._engine.read(lambda tx: [_sensor_state(tx, r) for r in tx.all(SENSOR_STATES)])

    def sensor_state(self, name: str) -> SensorState | None:
        """One sensor's state; None when it has never run nor been enabled/disabled."""

        def body(tx: Tx) -> SensorState | None:
            row = tx.one(SENSOR_STATE, {"name": name})
            return None if row is None else _sensor_state(tx, row)

        return self._engine.read(body)

    def record_sensor_run(
        self,
        name: str,
        run: SensorRun,
        tasks: Sequence[NewTask],
        state: Mapping[str, object] | None,
        feedback: Sequence[TaskFeedback] = (),
    ) -> BatchResult:
        """Insert a sensor run's tasks, apply its ``feedback`` to the tasks it names
        (``vigil.store.feedback``) and update its state in one transaction, so a
        cursor is saved only together with what it produced. ``state`` None keeps
        the stored one."""
        now = self._clock.now_ms()
        actor = f"sensor:{name}"

        def body(tx: Tx) -> BatchResult:
            batch = insert_batch(tx, tasks, now, actor, max_retries=self._default_max_retries, limits=self._limits)
            for item in feedback:
                apply_feedback(tx, item, now, actor)
            params = {
                "name": name,
                "started_at": run.started_at,
                "duration_ms": run.duration_ms,
                "status": run.status,
                "error": run.error,
                "failures": run.consecutive_failures,
                "created": len(batch.created_ids),
                "ignored": batch.ignored,
                "dropped": run.dropped,
                "rejected": batch.rejected,
                "next_due_at": run.next_due_at,
                "state": None if state is None else tx.dumps(dict(state)),
            }
            tx.run(RECORD_SENSOR_RUN, params)
            crash_point("sensor-batch")
            return batch

        return self._engine.write(body)

    def set_sensor_enabled(self, name: str, enabled: bool) -> None:
        """Enable or disable a sensor (creates its state row if needed)."""
        params = {"name": name, "enabled": int(enabled)}
        self._engine.write(lambda tx: tx.run(SET_SENSOR_ENABLED, params))

    def record_sensor_skip(self, name: str, skip: SensorSkip) -> None:
        """Add runs of a sensor that were not made to its state (creates its row if
        needed), in one transaction. A skip for the same reason as the latest one,
        with no run in between, extends it; runs already recorded are not counted
        again (two processes may both see one); the latest ``MAX_SKIPS`` stretches
        are kept."""

        def body(tx: Tx) -> None:
            row = tx.one(SENSOR_SKIPS, {"name": name})
            skips = [] if row is None else [SensorSkip(**s) for s in tx.loads(row["skips"])]
            merged = merge_skip(skips, skip, None if row is None else row["last_run_at"])
            tx.run(SET_SENSOR_SKIPS, {"name": name, "skips": tx.dumps([asdict(s) for s in merged])})

        self._engine.write(body)

    def loop_values(self) -> dict[str, object]:
        """Every loop-state key with its JSON value."""

        def body(tx: Tx) -> dict[str, object]:
            return {str(r["key"]): tx.loads(r["value"]) for r in tx.all(LOOP_VALUES)}

        return self._engine.read(body)

    def set_loop_values(self, values: Mapping[str, object]) -> None:
        """Write several loop-state keys (JSON values) in one transaction."""

        def body(tx: Tx) -> None:
            tx.many(SET_LOOP_VALUE, [{"key": k, "value": tx.dumps(v)} for k, v in values.items()])

        self._engine.write(body)

    def replace_loop_value(self, key: str, expected: object, value: object) -> bool:
        """Write ``value`` under ``key`` only if its current JSON value equals
        ``expected`` (None: the key is absent), atomically; returns whether it wrote.
        Lets an automatic change (a gate resuming itself) never undo a person's."""
        return self._engine.write(lambda tx: self._engine.replace_loop_value(tx, key, expected, value))
