"""``Store`` on PostgreSQL: several dispatchers on several hosts share one queue.

Open with ``await PostgresStore.open(url)``. The behaviours are the shared ones
(``tasks``, ``dispatching``, ``state``, ``pruning``): each public method is one
transaction, run whole in a worker thread on a pooled session (``db``: the pool,
the listening session, the translation of driver errors into ``vigil.errors``, and
the engine, whose claim is one statement: ``PgEngine.claim``). Its SQL is the
``postgres`` side of ``vigil.store.sql``. Audit events, status counts and dependency
counters come from triggers (``schema``), so they share the transaction of the
change.

Differences from SQLite that callers may notice:

* ``data_version()`` is notification-driven (LISTEN/NOTIFY): it moves soon after
  another store object commits a change (this one's own commits do not move it),
  with no round trip per call; see ``db.Changes``.
* ``checkpoint()`` returns (0, 0); ``backup()`` refuses and points to ``pg_dump``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from vigil.clock import Clock, SystemClock
from vigil.config import LimitsSettings
from vigil.errors import OperationError
from vigil.models import DEFAULT_MAX_RETRIES
from vigil.store.base import Store
from vigil.store.postgres.db import POOL_MAX, PgDatabase, PgEngine

T = TypeVar("T")


class PostgresStore(Store):
    """The ``Store`` protocol on one PostgreSQL database."""

    def __init__(
        self,
        db: PgDatabase,
        clock: Clock,
        default_max_retries: int,
        limits: LimitsSettings | None = None,
        pass_env: Sequence[str] = (),
    ) -> None:
        self._db = db
        self.where = db.where
        self._behave_on(PgEngine(db), clock, default_max_retries, limits, pass_env)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        clock: Clock | None = None,
        default_max_retries: int = DEFAULT_MAX_RETRIES,
        limits: LimitsSettings | None = None,
        pool_max: int = POOL_MAX,
        busy_timeout_ms: int = 5000,
        pass_env: Sequence[str] = (),
    ) -> PostgresStore:
        """Connect to ``url`` (a ``postgresql://`` URL), creating or migrating the
        schema if needed. ``limits`` are the flood limits every insert obeys (None:
        none); ``pool_max`` bounds this store's connections (plus one listening);
        ``busy_timeout_ms`` is how long a write waits for a row or table another
        session holds locked before it is retried (then ``StoreBusy``);
        ``pass_env`` names more secrets to mask in what the agent writes (``Tasks``).
        Raises ``StoreError`` (one line naming host:port/db, never the password) or
        ``SchemaTooNew``."""
        db = await PgDatabase.open(url, pool_max=pool_max, lock_timeout_ms=busy_timeout_ms)
        return cls(db, clock or SystemClock(), default_max_retries, limits, pass_env)

    async def _hop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` in a worker thread (it borrows a pooled session there)."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def data_version(self) -> int:
        """Moves when a notification of another session's commit has arrived (no
        round trip: the listening session counts them as they come)."""
        return self._db.data_version()

    async def backup(self, target: Path) -> None:
        raise OperationError(
            f"vigil backup copies SQLite files; back up the PostgreSQL database at {self.where} with pg_dump"
        )

    async def checkpoint(self, *, truncate: bool = False) -> tuple[int, int]:
        return 0, 0
