"""What every part of the PostgreSQL store shares: the insert path of a task (single
adds, batches and sensor runs alike) and the state a store object holds.

SQL for PostgreSQL lives only in ``vigil/store/postgres*.py``.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg.types.json import Jsonb

from vigil.clock import Clock
from vigil.config import LimitsSettings
from vigil.errors import InputError, InvalidTransition, TaskNotFound
from vigil.models import MAX_PRIORITY, MIN_PRIORITY, DedupScope, NewTask
from vigil.store.postgres_db import Conn, PgDatabase, Row
from vigil.store.postgres_limits import PgFloodGate
from vigil.store.postgres_queries import (
    SQL_ADD_DEPS,
    SQL_ADD_TASK,
    SQL_ADD_TASK_EVER,
    SQL_EXISTING_IDS,
    SQL_GET_TASK,
    SQL_LOOP_VERSION,
)
from vigil.store.sqlite_limits import Refusal

OWN_VERSIONS_KEPT = 4096  # loop-state versions this store wrote, remembered for if_version


def task_params(new: NewTask, now: int, actor: str, default_max_retries: int) -> dict[str, Any]:
    """The parameters of ``SQL_ADD_TASK`` / ``SQL_ADD_TASK_EVER``; raises
    ``InputError`` for what the schema cannot say clearly."""
    if not new.subject.strip():
        raise InputError("subject must not be empty")
    if not MIN_PRIORITY <= new.priority <= MAX_PRIORITY:
        raise InputError(f"priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {new.priority}")
    if new.max_retries is not None and new.max_retries < 0:
        raise InputError(f"max retries must be 0 or more, not {new.max_retries}")
    if new.dedup is DedupScope.EVER and new.source_key is None:
        raise InputError("dedup scope 'ever' needs a source key")
    return {
        "subject": new.subject,
        "description": new.description,
        "skills": Jsonb(list(new.skills)),
        "priority": new.priority,
        "source": new.source,
        "source_key": new.source_key,
        "dedup": str(new.dedup),
        "parent_id": new.parent_id,
        "scheduled_for": now if new.scheduled_for is None else new.scheduled_for,
        "now": now,
        "actor": actor,
        "max_retries": default_max_retries if new.max_retries is None else new.max_retries,
        "approval": new.requires_approval,
        "workdir": new.workdir,
    }


async def fetch_one(conn: Conn, sql: str, params: dict[str, Any]) -> Row | None:
    cur = await conn.execute(sql, params)
    return await cur.fetchone()


async def fetch_all(conn: Conn, sql: str, params: dict[str, Any] | None = None) -> list[Row]:
    cur = await conn.execute(sql, params)
    return await cur.fetchall()


async def require_task(conn: Conn, task_id: int) -> Row:
    row = await fetch_one(conn, SQL_GET_TASK, {"id": task_id})
    if row is None:
        raise TaskNotFound(task_id)
    return row


async def not_awaiting_approval(conn: Conn, task_id: int, action: str) -> InvalidTransition:
    status = (await require_task(conn, task_id))["status"]
    return InvalidTransition(task_id, f"{status} and not awaiting approval", action)


async def _require_ids(conn: Conn, new: NewTask) -> None:
    """``TaskNotFound`` for a missing parent or dependency (one query for all)."""
    wanted = ([] if new.parent_id is None else [new.parent_id]) + list(new.depends_on)
    if not wanted:
        return
    found = {int(r["id"]) for r in await fetch_all(conn, SQL_EXISTING_IDS, {"ids": wanted})}
    for task_id in wanted:
        if task_id not in found:
            raise TaskNotFound(task_id)


async def insert_task(
    conn: Conn, new: NewTask, now: int, actor: str, max_retries: int, *, flood: PgFloodGate | None = None
) -> int | Refusal | None:
    """Insert one task and its dependencies: its id, None when the source key
    deduplicated it, or the ``Refusal`` of a flood limit (counted, nothing added)."""
    params = task_params(new, now, actor, max_retries)
    await _require_ids(conn, new)
    sql = SQL_ADD_TASK if new.dedup is DedupScope.OPEN else SQL_ADD_TASK_EVER
    refusal = None if flood is None else await flood.check(conn, new)
    if flood is not None and refusal is not None:
        # A task its key deduplicates is "already there", not refused: find out by
        # inserting it in a savepoint that is always rolled back (this rare path only).
        async with conn.transaction(force_rollback=True):
            row = await fetch_one(conn, sql, params)
        if row is None:
            return None
        await flood.record(conn, new, refusal)
        return refusal
    row = await fetch_one(conn, sql, params)
    if row is None:
        return None
    if flood is not None:
        flood.added(new)
    task_id = int(row["id"])
    if new.depends_on:
        await conn.execute(SQL_ADD_DEPS, {"task_id": task_id, "deps": list(new.depends_on)})
    return task_id


class PostgresBase:
    """The database, clock and limits a store object holds; the PostgreSQL store is
    this plus its method groups (``postgres_dispatch``, ``postgres_state``)."""

    def __init__(
        self, db: PgDatabase, clock: Clock, default_max_retries: int, limits: LimitsSettings | None = None
    ) -> None:
        self._db = db
        self._clock = clock
        self._default_max_retries = default_max_retries
        self._limits = limits
        # Loop-state versions made by this store's own writes: they do not count as
        # a change for finish_and_claim(if_version=…), as SQLite ignores a
        # connection's own commits.
        self._own_loop_versions: set[int] = set()
        self.where = db.where

    def _may_refuse(self, new: NewTask) -> bool:
        """Whether a flood limit could refuse ``new`` (then it is checked in the
        insert transaction)."""
        return self._limits is not None and PgFloodGate.may_refuse(self._limits, new)

    def _flood_gate(self, now: int) -> PgFloodGate | None:
        """The flood limits for one insert transaction (None: no limits configured)."""
        return None if self._limits is None else PgFloodGate(self._limits, now)

    async def _note_loop_write(self, conn: Conn) -> None:
        """Remember the loop-state version this transaction's write made (call it in
        that transaction, after the write: the row is then locked by it)."""
        row = await fetch_one(conn, SQL_LOOP_VERSION, {})
        assert row is not None
        self._own_loop_versions.add(int(row["version"]))
        if len(self._own_loop_versions) > OWN_VERSIONS_KEPT:
            newest = sorted(self._own_loop_versions)[OWN_VERSIONS_KEPT // 2 :]
            self._own_loop_versions = set(newest)

    def _versions_unchanged_since(self, version: int) -> list[int]:
        """The loop-state versions that mean "unchanged since ``version``" for this
        store: ``version`` and the run of versions right after it that its own
        writes made."""
        versions = [version]
        while versions[-1] + 1 in self._own_loop_versions:
            versions.append(versions[-1] + 1)
        return versions


def dumps(value: object) -> str:
    """JSON text of a loop-state value."""
    return json.dumps(value)
