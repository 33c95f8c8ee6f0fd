"""The dispatcher lanes of a PostgreSQL store (``[dispatch] lanes``): one
session-level advisory lock per lane, held by a dedicated session (connection)
for as long as the dispatcher runs.

``pg_try_advisory_lock(LANE_KEY, lane)`` never waits. The server frees the lock
when the session ends, however it ends (the dispatcher's host dies, the network
drops, an admin terminates the backend), so a lost lane never stays taken. The
session is probed (``still_held``) and a probe that fails or does not answer in
``PROBE_TIMEOUT_S`` counts as a lost lane: the server may hand the lane to another
dispatcher at any moment after that, so the dispatcher must stop claiming.

Advisory locks belong to one database, so two Vigil databases on one server do not
share lanes. The lane session must reach the server directly or through a pooler in
session mode: a transaction-mode pooler (PgBouncer's ``pool_mode = transaction``)
would hand the session, and its locks, to other clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg

from vigil.errors import OperationError
from vigil.store.postgres.db import connect_failure, describe

log = logging.getLogger("vigil.dispatch")


def _first_line(err: BaseException) -> str:
    """The driver's first line (its messages span several); the type for an empty one."""
    return next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)


LANE_KEY = 0x56494749  # "VIGI": the first key of every lane lock; the lane is the second
PROBE_TIMEOUT_S = 5.0  # a probe slower than this counts as a lost session
CONNECT_TIMEOUT_S = 10

# Server-side keepalives: a host that vanishes without closing its socket (power
# loss, a cable) has its session ended, and its lane freed, within about a minute.
SQL_KEEPALIVES = (
    "SET tcp_keepalives_idle = 20",
    "SET tcp_keepalives_interval = 10",
    "SET tcp_keepalives_count = 3",
    "SET idle_session_timeout = 0",  # the session idles by design: never end it for that
)
SQL_TRY_LANE = "SELECT pg_try_advisory_lock(%s, %s)"
SQL_UNLOCK_LANE = "SELECT pg_advisory_unlock(%s, %s)"
SQL_PROBE = "SELECT 1"
# Who holds lanes of this database: two-key advisory locks show key 1 as classid,
# key 2 as objid and objsubid 2.
SQL_LANE_HOLDERS = """
SELECT l.objid::int AS lane, a.application_name, host(a.client_addr) AS client, a.backend_start
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = %s
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY l.objid
"""


# Whether a session other than this one holds a lane of this database.
SQL_OTHER_LANES_HELD = """
SELECT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = %s AND pid <> pg_backend_pid()
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
"""


class PostgresLanes:
    """``lanes`` advisory-lock lanes in the database at ``url``; holds at most one.

    ``name`` is shown to others as the holder (the session's application_name).
    Not thread-safe; one per dispatcher process.
    """

    def __init__(self, url: str, lanes: int, *, name: str) -> None:
        self.lanes = lanes
        self._url = url
        self._name = name[:63]  # application_name is cut at 63 bytes by the server
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        self._lane: int | None = None
        self._busy = asyncio.Lock()  # one statement at a time on the session

    @property
    def lane(self) -> int | None:
        return self._lane

    @property
    def where(self) -> str:
        return f"advisory locks in {describe(self._url)}"

    async def _session(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._url,
                autocommit=True,
                application_name=self._name,
                connect_timeout=CONNECT_TIMEOUT_S,
                # client-side keepalives: a half-open connection fails instead of hanging
                keepalives=1,
                keepalives_idle=20,
                keepalives_interval=10,
                keepalives_count=3,
            )
        except psycopg.Error as err:
            raise connect_failure(err, describe(self._url)) from None
        self._conn = conn
        try:
            for statement in SQL_KEEPALIVES:
                await conn.execute(statement)
        except psycopg.Error as err:
            await self._drop()
            where = describe(self._url)
            raise OperationError(f"cannot set up the lane session in {where}: {_first_line(err)}") from None
        return conn

    async def try_acquire(self) -> bool:
        if self._lane is not None:
            return True
        async with self._busy:
            conn = await self._session()
            try:
                for lane in range(self.lanes):
                    row = await (await conn.execute(SQL_TRY_LANE, (LANE_KEY, lane))).fetchone()
                    if row is not None and row[0] is True:
                        self._lane = lane
                        return True
            except psycopg.Error as err:
                await self._drop()
                raise OperationError(
                    f"cannot take a dispatcher lane in {describe(self._url)}: {_first_line(err)}"
                ) from None
        return False

    async def still_held(self) -> bool:
        if self._lane is None or self._conn is None:
            return False
        async with self._busy:
            try:
                async with asyncio.timeout(PROBE_TIMEOUT_S):
                    await self._conn.execute(SQL_PROBE)
            except (psycopg.Error, TimeoutError) as err:
                log.error("lost dispatcher lane %d: its database session failed (%s)", self._lane, _first_line(err))
                self._lane = None
                await self._drop()
                return False
        return True

    async def holders(self) -> str:
        try:
            async with self._busy:
                conn = await self._session()
                rows = await (await conn.execute(SQL_LANE_HOLDERS, (LANE_KEY,))).fetchall()
        except (psycopg.Error, OperationError):
            return "other dispatchers"
        if not rows:
            return "other dispatchers"
        shown = [f"lane {lane}: {app or 'unnamed'} from {client or 'local socket'}" for lane, app, client, _ in rows]
        return "; ".join(shown)

    async def others_held(self) -> bool:
        try:
            async with self._busy:
                conn = await self._session()
                row = await (await conn.execute(SQL_OTHER_LANES_HELD, (LANE_KEY,))).fetchone()
                if self._lane is None:
                    await self._drop()  # a probe only: keep no session open for it
        except (psycopg.Error, OperationError):
            return False
        return bool(row and row[0])

    async def release(self) -> None:
        async with self._busy:
            if self._lane is not None and self._conn is not None and not self._conn.closed:
                with contextlib.suppress(psycopg.Error):
                    await self._conn.execute(SQL_UNLOCK_LANE, (LANE_KEY, self._lane))
            self._lane = None
            await self._drop()

    async def _drop(self) -> None:
        """Close the session; the server frees whatever it still held."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(PROBE_TIMEOUT_S):
                    await conn.close()
