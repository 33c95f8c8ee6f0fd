"""What every part of the SQLite store shares: the insert path of a task (used by
single adds, batches and sensor runs alike) and the state a store object holds.

SQL for SQLite lives only in ``vigil/store/sqlite*.py``.
"""

from __future__ import annotations

import json
import sqlite3

from vigil.clock import Clock
from vigil.config import LimitsSettings
from vigil.errors import InputError, InvalidTransition, TaskNotFound
from vigil.models import (
    MAX_PRIORITY,
    MIN_PRIORITY,
    DedupScope,
    NewTask,
)
from vigil.store.sqlite_db import Database
from vigil.store.sqlite_limits import FloodGate, Refusal
from vigil.store.sqlite_queries import (
    SQL_ADD_TASK,
    SQL_ADD_TASK_EVER,
)


def task_params(new: NewTask, now: int, actor: str, default_max_retries: int) -> tuple[object, ...]:
    """The positional parameters of ``SQL_ADD_TASK`` / ``SQL_ADD_TASK_EVER``."""
    if new.dedup is DedupScope.EVER and new.source_key is None:
        raise InputError("dedup scope 'ever' needs a source key")
    return (
        new.subject,
        new.description,
        json.dumps(list(new.skills)) if new.skills else "[]",
        new.priority,
        new.source,
        new.source_key,
        new.parent_id,
        now if new.scheduled_for is None else new.scheduled_for,
        now,
        actor,
        default_max_retries if new.max_retries is None else new.max_retries,
        int(new.requires_approval),
        new.workdir,
    )


def data_version_of(conn: sqlite3.Connection) -> int:
    """Changes whenever another connection commits (this one's commits leave it)."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def require_task(conn: sqlite3.Connection, task_id: int) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
    if row is None:
        raise TaskNotFound(task_id)
    return row


def not_awaiting_approval(conn: sqlite3.Connection, task_id: int, action: str) -> InvalidTransition:
    status = require_task(conn, task_id)["status"]
    return InvalidTransition(task_id, f"{status} and not awaiting approval", action)


def check_new_task(conn: sqlite3.Connection, new: NewTask) -> None:
    """Validate what the schema cannot say clearly (raises before any insert)."""
    if not new.subject.strip():
        raise InputError("subject must not be empty")
    if not MIN_PRIORITY <= new.priority <= MAX_PRIORITY:
        raise InputError(f"priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {new.priority}")
    if new.max_retries is not None and new.max_retries < 0:
        raise InputError(f"max retries must be 0 or more, not {new.max_retries}")
    if new.parent_id is not None:
        require_task(conn, new.parent_id)
    for dep in new.depends_on:
        require_task(conn, dep)


def insert_task(
    conn: sqlite3.Connection, new: NewTask, now: int, actor: str, max_retries: int, *, flood: FloodGate | None = None
) -> int | Refusal | None:
    """Insert one task and its dependencies: its id, None when the source key
    deduplicated it, or the ``Refusal`` of a flood limit (counted, nothing added)."""
    check_new_task(conn, new)
    params = task_params(new, now, actor, max_retries)
    sql = SQL_ADD_TASK if new.dedup is DedupScope.OPEN else SQL_ADD_TASK_EVER
    refusal = None if flood is None else flood.check(conn, new)
    if flood is not None and refusal is not None:
        # A task its key deduplicates is "already there", not refused: find out by
        # inserting it and undoing that (only on this rare path).
        conn.execute("SAVEPOINT flood_check")
        row = conn.execute(sql, params).fetchone()
        conn.execute("ROLLBACK TO flood_check")
        conn.execute("RELEASE flood_check")
        if row is None:
            return None
        flood.record(conn, new, refusal)
        return refusal
    row = conn.execute(sql, params).fetchone()
    if row is None:
        return None
    if flood is not None:
        flood.added(new)
    task_id = int(row[0])
    conn.executemany(
        "INSERT OR IGNORE INTO task_deps (task_id, depends_on) VALUES (?, ?)",
        [(task_id, dep) for dep in new.depends_on],
    )
    return task_id


class SqliteBase:
    """The connection, clock and limits a store object holds; the SQLite store is
    this plus its method groups (``sqlite_dispatch``, ``sqlite_state``)."""

    def __init__(
        self, db: Database, clock: Clock, default_max_retries: int, limits: LimitsSettings | None = None
    ) -> None:
        self._db = db
        self._clock = clock
        self._default_max_retries = default_max_retries
        self._limits = limits
        self.path = db.path

    def _flood_gate(self, now: int) -> FloodGate | None:
        """The flood limits for one insert transaction (None: no limits configured)."""
        return None if self._limits is None else FloodGate(self._limits, now)
