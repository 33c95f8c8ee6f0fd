"""Sensor state, loop state and maintenance on the SQLite store."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path

from vigil.faults import crash_point
from vigil.models import (
    BatchResult,
    NewTask,
    SensorRun,
    SensorState,
)
from vigil.store.sqlite_base import SqliteBase, insert_task
from vigil.store.sqlite_db import TRUNCATE_WAIT_MS
from vigil.store.sqlite_limits import Refusal
from vigil.store.sqlite_queries import (
    SQL_LOOP_VALUE,
    SQL_LOOP_VALUES,
    SQL_RECORD_SENSOR_RUN,
    SQL_SET_LOOP_VALUE,
)
from vigil.store.sqlite_rows import (
    row_to_sensor_state,
)


class StateMethods(SqliteBase):
    """``Store`` methods for sensors, the loop's key/value state, backup and
    checkpoints (mixed into ``SqliteStore``)."""

    # --- sensors ----------------------------------------------------------------------
    async def sensor_states(self) -> list[SensorState]:
        sql = "SELECT * FROM sensor_state ORDER BY name"
        return await self._db.read(lambda conn: [row_to_sensor_state(r) for r in conn.execute(sql)])

    async def sensor_state(self, name: str) -> SensorState | None:
        sql = "SELECT * FROM sensor_state WHERE name = ?"

        def body(conn: sqlite3.Connection) -> SensorState | None:
            row = conn.execute(sql, (name,)).fetchone()
            return None if row is None else row_to_sensor_state(row)

        return await self._db.read(body)

    async def record_sensor_run(
        self,
        name: str,
        run: SensorRun,
        tasks: Sequence[NewTask],
        state: Mapping[str, object] | None,
    ) -> BatchResult:
        now = self._clock.now_ms()
        actor = f"sensor:{name}"

        def body(conn: sqlite3.Connection) -> BatchResult:
            flood = self._flood_gate(now)
            created = [insert_task(conn, new, now, actor, self._default_max_retries, flood=flood) for new in tasks]
            ids = tuple(task_id for task_id in created if isinstance(task_id, int))
            rejected = sum(isinstance(task_id, Refusal) for task_id in created)
            conn.execute(
                SQL_RECORD_SENSOR_RUN,
                {
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
                },
            )
            crash_point("sensor-batch")
            return BatchResult(ids, len(tasks) - len(ids) - rejected, rejected)

        return await self._db.write(body)

    async def set_sensor_enabled(self, name: str, enabled: bool) -> None:
        await self._db.write(
            lambda conn: conn.execute(
                """INSERT INTO sensor_state (name, enabled) VALUES (?, ?)
                   ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled""",
                (name, int(enabled)),
            )
        )

    # --- loop state -------------------------------------------------------------------
    async def loop_values(self) -> dict[str, object]:
        rows = await self._db.read(lambda conn: conn.execute(SQL_LOOP_VALUES).fetchall())
        return {str(r["key"]): json.loads(r["value"]) for r in rows}

    async def set_loop_values(self, values: Mapping[str, object]) -> None:
        rows = [(key, json.dumps(value)) for key, value in values.items()]
        await self._db.write(
            lambda conn: conn.executemany(
                """INSERT INTO loop_state (key, value) VALUES (?, ?)
                   ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
                rows,
            )
        )

    async def replace_loop_value(self, key: str, expected: object, value: object) -> bool:
        encoded = json.dumps(value)

        def body(conn: sqlite3.Connection) -> bool:
            row = conn.execute(SQL_LOOP_VALUE, (key,)).fetchone()
            current = None if row is None else json.loads(row[0])
            if current != expected:
                return False
            conn.execute(SQL_SET_LOOP_VALUE, (key, encoded))
            return True

        return await self._db.write(body)

    # --- maintenance ------------------------------------------------------------------
    async def backup(self, target: Path) -> None:
        await self._db.backup(target)

    async def checkpoint(self, *, truncate: bool = False) -> tuple[int, int]:
        def body(conn: sqlite3.Connection) -> tuple[int, int]:
            if not truncate:
                _, logged, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                return int(logged), int(copied)
            # The wait for readers goes through the busy handler: bound it, then
            # give the connection its own timeout back.
            usual = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
            conn.execute(f"PRAGMA busy_timeout = {TRUNCATE_WAIT_MS}")
            try:
                _, logged, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                conn.execute(f"PRAGMA busy_timeout = {usual}")
            return int(logged), int(copied)

        return await self._db.read(body)

    async def integrity_check(self) -> str:
        """``ok``, or SQLite's first complaint."""
        return str(await self._db.read(lambda conn: conn.execute("PRAGMA quick_check").fetchone()[0]))

    async def explain(self, sql: str, params: Mapping[str, object] | Sequence[object]) -> list[str]:
        """The query plan of ``sql`` (for tests and ``vigil doctor``)."""
        rows = await self._db.read(lambda conn: conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall())
        return [str(r["detail"]) for r in rows]
