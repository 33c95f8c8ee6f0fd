"""``Store`` on one SQLite file: the embedded default backend.

The behaviours are the shared ones (``tasks`` …), run on this file's connection in
its own worker thread, one hop per unit of work (``db``). What is SQLite's alone is
in this folder: its connection and engine (``db``, with the claim), its schema and
migrations (``schema``), backups (``backup``), the export to PostgreSQL
(``export``), its errors (``errors``), and here: the WAL, backups and query plans.
Its SQL is the ``sqlite`` side of ``vigil.store.sql``. Audit events, status counts
and dependency counters come from triggers (``schema``), so they share the
transaction of the change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from vigil.clock import Clock, SystemClock
from vigil.config import LimitsSettings
from vigil.models import DEFAULT_MAX_RETRIES
from vigil.store.base import Store
from vigil.store.sqlite.db import TRUNCATE_WAIT_MS, Database, SqliteEngine
from vigil.store.sqlite.schema import check_openable, migrate

T = TypeVar("T")


class SqliteStore(Store):
    """``Store`` on one SQLite file. Open with ``await SqliteStore.open(path)``."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        default_max_retries: int,
        limits: LimitsSettings | None = None,
        pass_env: Sequence[str] = (),
    ) -> None:
        self._db = db
        self.path = db.path
        self._behave_on(SqliteEngine(db.connection), clock, default_max_retries, limits, pass_env)

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        clock: Clock | None = None,
        synchronous: str = "FULL",
        busy_timeout_ms: int = 5000,
        default_max_retries: int = DEFAULT_MAX_RETRIES,
        limits: LimitsSettings | None = None,
        pass_env: Sequence[str] = (),
    ) -> SqliteStore:
        """Open (creating and migrating if needed) the database at ``path``.

        ``limits`` are the flood limits every insert obeys (None: none);
        ``pass_env`` names more secrets to mask in what the agent writes (``Tasks``). Raises
        ``NotADatabase``, ``SchemaTooNew`` or ``StoreError``.
        """
        db = await Database.open(path, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms, check=check_openable)
        try:
            await db.read(lambda conn: migrate(conn, path))
        except BaseException:
            await db.close()
            raise
        return cls(db, clock or SystemClock(), default_max_retries, limits, pass_env)

    async def _hop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self._db.call(fn, *args, **kwargs)

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> SqliteStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def file_problem(self) -> str | None:
        """Why this store must stop (its file was removed or replaced, or its
        write-ahead log deleted), or None; a ``stat`` or two, no database work
        (``sqlite.db.Connection.file_problem``)."""
        return self._db.connection.file_problem(with_log=True)

    async def data_version(self) -> int:
        # Changes whenever another connection commits (this one's commits leave it).
        return await self._db.read(lambda conn: int(conn.execute("PRAGMA data_version").fetchone()[0]))

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
