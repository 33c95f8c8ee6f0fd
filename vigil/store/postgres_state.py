"""Sensor state, loop state and maintenance on the PostgreSQL store."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from vigil.errors import OperationError
from vigil.models import BatchResult, NewTask, SensorRun, SensorState
from vigil.store.postgres_base import PostgresBase, fetch_all, fetch_one, insert_task
from vigil.store.postgres_db import Conn
from vigil.store.postgres_queries import (
    SQL_LOOP_VALUES,
    SQL_RECORD_SENSOR_RUN,
    SQL_REPLACE_ABSENT_LOOP_VALUE,
    SQL_REPLACE_LOOP_VALUE,
    SQL_SENSOR_STATE,
    SQL_SENSOR_STATES,
    SQL_SET_LOOP_VALUES,
    SQL_SET_SENSOR_ENABLED,
)
from vigil.store.postgres_rows import row_to_sensor_state
from vigil.store.sqlite_limits import Refusal


class StateMethods(PostgresBase):
    """``Store`` methods for sensors, the loop's key/value state and maintenance
    (mixed into ``PostgresStore``)."""

    # --- sensors ----------------------------------------------------------------------
    async def sensor_states(self) -> list[SensorState]:
        rows = await self._db.read(lambda conn: fetch_all(conn, SQL_SENSOR_STATES))
        return [row_to_sensor_state(r) for r in rows]

    async def sensor_state(self, name: str) -> SensorState | None:
        row = await self._db.read(lambda conn: fetch_one(conn, SQL_SENSOR_STATE, {"name": name}))
        return None if row is None else row_to_sensor_state(row)

    async def record_sensor_run(
        self,
        name: str,
        run: SensorRun,
        tasks: Sequence[NewTask],
        state: Mapping[str, object] | None,
    ) -> BatchResult:
        now = self._clock.now_ms()
        actor = f"sensor:{name}"

        async def body(conn: Conn) -> BatchResult:
            flood = self._flood_gate(now)
            created = [
                await insert_task(conn, new, now, actor, self._default_max_retries, flood=flood) for new in tasks
            ]
            ids = tuple(task_id for task_id in created if isinstance(task_id, int))
            rejected = sum(isinstance(task_id, Refusal) for task_id in created)
            params = {
                "name": name,
                "started_at": run.started_at,
                "duration_ms": run.duration_ms,
                "status": run.status,
                "error": run.error,
                "failures": run.consecutive_failures,
                "created": len(ids),
                "ignored": len(tasks) - len(ids) - rejected,
                "dropped": run.dropped,
                "rejected": rejected,
                "next_due_at": run.next_due_at,
                "state": None if state is None else json.dumps(dict(state)),
            }
            await conn.execute(SQL_RECORD_SENSOR_RUN, params)
            return BatchResult(ids, len(tasks) - len(ids) - rejected, rejected)

        return await self._db.write(body)

    async def set_sensor_enabled(self, name: str, enabled: bool) -> None:
        params = {"name": name, "enabled": int(enabled)}
        await self._db.statement(lambda conn: conn.execute(SQL_SET_SENSOR_ENABLED, params))

    # --- loop state -------------------------------------------------------------------
    async def loop_values(self) -> dict[str, object]:
        rows = await self._db.read(lambda conn: fetch_all(conn, SQL_LOOP_VALUES))
        return {str(r["key"]): r["value"] for r in rows}

    async def set_loop_values(self, values: Mapping[str, object]) -> None:
        params = {"keys": list(values), "values": [json.dumps(v) for v in values.values()]}
        await self._db.write(lambda conn: conn.execute(SQL_SET_LOOP_VALUES, params))

    async def replace_loop_value(self, key: str, expected: object, value: object) -> bool:
        params = {"key": key, "expected": json.dumps(expected), "value": json.dumps(value)}
        sql = SQL_REPLACE_ABSENT_LOOP_VALUE if expected is None else SQL_REPLACE_LOOP_VALUE
        return await self._db.write(lambda conn: fetch_one(conn, sql, params)) is not None

    # --- maintenance ------------------------------------------------------------------
    async def backup(self, target: Path) -> None:
        raise OperationError(
            f"vigil backup copies SQLite files; back up the PostgreSQL database at {self.where} with pg_dump"
        )

    async def checkpoint(self, *, truncate: bool = False) -> tuple[int, int]:
        return 0, 0

    async def explain(self, sql: str, params: Mapping[str, object]) -> list[str]:
        """The query plan of ``sql`` (``EXPLAIN`` text lines; for tests and ``vigil doctor``)."""
        rows = await self._db.read(lambda conn: fetch_all(conn, "EXPLAIN " + sql, dict(params)))
        return [str(r["QUERY PLAN"]) for r in rows]
