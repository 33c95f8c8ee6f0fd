"""The PostgreSQL connections of one store object, and its transaction helpers.

* A pool (``psycopg_pool.ConnectionPool``) of autocommit connections: a read is
  one or more statements each on its own snapshot; ``write(fn)`` runs ``fn`` inside
  one transaction, committed on success and rolled back on any exception. ``fn`` is
  a plain function over a blocking connection, run whole in a worker thread (one
  hop per unit of work), so no transaction stays open across an await and a
  cancelled caller's body still runs to its commit or rollback.
* Serialization failures, deadlocks and lock waits longer than ``lock_timeout`` (the
  store's ``busy_timeout``, as on SQLite) are retried as a whole unit of work with
  jittered backoff, then raised as ``StoreBusy``: a row another session keeps locked
  (a person's open ``psql`` transaction) cannot hang a caller forever.
* Sessions the server ended (a restart): a pooled session idle for ``IDLE_PROBE_S``
  is probed before use and replaced if dead, and a read that meets a dead session
  anyway is tried once more on a new one. A write is never replayed after a lost
  connection (it may have committed): it fails with one line.
* Driver errors become ``vigil.errors`` types here and nowhere else; messages name
  the database as ``host:port/dbname``, never with the password.
* One dedicated session LISTENs on ``vigil_changes`` (see ``Changes``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import re
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from vigil.errors import DuplicateOpenTask, InputError, StoreBusy, StoreError, VigilError
from vigil.store import rows
from vigil.store.postgres.schema import CHANGES_CHANNEL, migrate
from vigil.store.sql.runs import CLAIM
from vigil.store.sql.state import REPLACE_ABSENT_LOOP_VALUE, REPLACE_LOOP_VALUE
from vigil.store.transaction import Params, Sql, Tx

log = logging.getLogger("vigil.store")

SQL_LISTEN = f"LISTEN {CHANGES_CHANNEL}"

T = TypeVar("T")
Row = dict[str, Any]
Conn = psycopg.Connection[Row]

CONNECT_TIMEOUT_S = 10
POOL_MAX = 4  # a process rarely has more than a few store calls in flight
BUSY_RETRIES = 5
BUSY_BACKOFF_S = 0.02
# Safety net: data_version moves at least this often even when no notification
# arrives (a notification from a session whose pid we mistook for ours, say).
SAFETY_TICK_S = 30.0
RECONNECT_S = 1.0  # first wait before listening again; doubles up to RECONNECT_MAX_S
RECONNECT_MAX_S = 30.0
IDLE_PROBE_S = 2.0  # a pooled session idle longer is probed (one empty query) before use
# libpq keepalives: a server or network that vanishes without closing the socket is
# noticed by the listening session within about a minute.
KEEPALIVES: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 20, "keepalives_interval": 10, "keepalives_count": 3}


def describe(url: str) -> str:
    """``host:port/dbname`` of a URL, for messages (never the password)."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the PostgreSQL URL (malformed)"
    host = str(info.get("host") or "localhost")
    return f"{host}:{info.get('port') or 5432}/{info.get('dbname') or info.get('user') or ''}"


def _first_line(err: BaseException) -> str:
    return next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)


def connect_failure(err: BaseException, where: str) -> StoreError:
    """One line saying why the server at ``where`` could not be used."""
    text = str(err)
    missing = _MISSING.search(text)
    if missing:  # name it: a wrong user and a wrong database are fixed differently
        kind, name = missing.groups()
        what = "the login was refused: role" if kind == "role" else "database"
        return StoreError(f"cannot connect to PostgreSQL at {where}: {what} {name!r} does not exist")
    for needle, reason in _CONNECT_CAUSES:
        if needle in text:
            return StoreError(f"cannot connect to PostgreSQL at {where}: {reason}")
    # libpq repeats "connection to server at … failed:" before the cause; keep the cause.
    line = _first_line(err)
    cause = line.rsplit("failed: ", 1)[-1]
    return StoreError(f"cannot connect to PostgreSQL at {where}: {cause}")


_MISSING = re.compile(r'FATAL:\s+(role|database) "([^"]*)" does not exist')
_CONNECT_CAUSES = (
    ("password authentication failed", "the login was refused (wrong user or password)"),
    ("no password supplied", "the login was refused: the server wants a password"),
    ("no pg_hba.conf entry", "the login was refused by the server's pg_hba.conf"),
    ("does not exist", "the database or role does not exist"),
    ("Connection refused", "the server is not running or not listening there (connection refused)"),
    ("could not translate host name", "unknown host"),
    ("failed to resolve host", "unknown host"),
    ("timeout expired", "the server did not answer in time"),
)


def translate(err: psycopg.Error, where: str) -> VigilError:
    """The ``vigil.errors`` type for a driver error (the only translation point).

    A constraint failure is bad input (the transaction was rolled back): the open
    source-key index → ``DuplicateOpenTask``, any other → ``InputError``."""
    if isinstance(err, pgerrors.UniqueViolation) and err.diag.constraint_name == "ux_tasks_open_key":
        return DuplicateOpenTask("another open task already has this source key")
    if isinstance(err, psycopg.IntegrityError):
        return InputError(f"the database refused the change: {_first_line(err)}")
    if isinstance(err, (pgerrors.SerializationFailure, pgerrors.DeadlockDetected, pgerrors.LockNotAvailable)):
        return StoreBusy(f"{where} stayed busy with conflicting changes; try again")
    if isinstance(err, psycopg.OperationalError) and _is_connection_error(err):
        return StoreError(f"lost the connection to PostgreSQL at {where}: {_first_line(err)}")
    return StoreError(f"PostgreSQL at {where}: {_first_line(err)}")


def _is_connection_error(err: psycopg.Error) -> bool:
    return err.sqlstate is None or err.sqlstate.startswith("08") or err.sqlstate.startswith("57P")


def _retryable(err: psycopg.Error) -> bool:
    return isinstance(err, (pgerrors.SerializationFailure, pgerrors.DeadlockDetected, pgerrors.LockNotAvailable))


class Changes:
    """``data_version`` from LISTEN/NOTIFY: a counter that moves when another session
    commits a change to tasks, runs, notes, loop state or sensor state.

    One dedicated session listens; a background task counts the notifications as
    they arrive (it sleeps on the socket: no polling). Notifications sent by this
    store's own pooled sessions are not counted, as SQLite's ``data_version`` ignores
    the connection's own commits. While the listening session is down, every call
    moves the counter (callers re-read rather than miss a change) and the task
    reconnects; the counter also moves every ``SAFETY_TICK_S`` as a slow safety net.
    """

    def __init__(self, url: str, listening: psycopg.AsyncConnection[Any], own_pids: set[int]) -> None:
        """Start counting on ``listening``, a session that has run ``SQL_LISTEN``."""
        self._url = url
        self._own_pids = own_pids
        self._version = 0
        self._listening = True
        self._ticked_at = time.monotonic()
        self._listener: psycopg.AsyncConnection[Any] | None = listening  # the session now listening
        self._task = asyncio.create_task(self._listen(), name="vigil-store-listen")

    def version(self) -> int:
        now = time.monotonic()
        if not self._listening or now - self._ticked_at >= SAFETY_TICK_S:
            self._bump()
        return self._version

    def _bump(self) -> None:
        self._version += 1
        self._ticked_at = time.monotonic()

    async def _listen(self) -> None:
        delay_s = RECONNECT_S
        while True:
            try:
                if self._listener is None:
                    self._listener = await psycopg.AsyncConnection.connect(
                        self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, **KEEPALIVES
                    )
                    await self._listener.execute(SQL_LISTEN)
                    self._listening = True
                    self._bump()  # whatever happened while not listening
                    log.info("change notifications from PostgreSQL resumed")
                    delay_s = RECONNECT_S
                async for note in self._listener.notifies():
                    if note.pid not in self._own_pids:
                        self._bump()
            except psycopg.Error as err:
                # Once per outage, not once per attempt: a server down for an hour
                # must not fill the log.
                if delay_s == RECONNECT_S:
                    log.warning("change notifications from PostgreSQL stopped (%s); reconnecting", _first_line(err))
            self._listening = False
            await self._drop_session()
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, RECONNECT_MAX_S)

    async def _drop_session(self) -> None:
        conn, self._listener = self._listener, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                await conn.close()

    async def close(self) -> None:
        """Stop listening and close the session (also when the task never started)."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._listening = False
        await self._drop_session()


class PgTx:
    """``Tx`` on a blocking psycopg session (``jsonb`` arrives as Python values)."""

    def __init__(self, conn: Conn) -> None:
        self._session = conn

    @staticmethod
    def _text(sql: Sql) -> str:
        text = sql.postgres
        if text is None:
            raise TypeError("a statement with nothing to run on PostgreSQL returns no rows")
        return text

    def one(self, sql: Sql, params: Params | None = None) -> Row | None:
        return self._session.execute(self._text(sql), params).fetchone()

    def all(self, sql: Sql, params: Params | None = None) -> list[Row]:
        return self._session.execute(self._text(sql), params).fetchall()

    def run(self, sql: Sql, params: Params | None = None) -> int:
        text = sql.postgres
        if text is None:
            return 0
        return self._session.execute(text, params).rowcount

    def many(self, sql: Sql, rows: Iterable[Params]) -> None:
        batch = list(rows)
        text = sql.postgres
        if batch and text is not None:
            with self._session.cursor() as cur:
                cur.executemany(text, batch)

    def loads(self, value: Any) -> Any:
        return value

    def dumps(self, value: object) -> Jsonb:
        return Jsonb(value)

    def array(self, values: Sequence[object]) -> list[object]:
        return list(values)


class PgEngine:
    """``Engine`` on a ``PgDatabase``'s pool: runs behaviours in the caller's thread."""

    def __init__(self, db: PgDatabase) -> None:
        self._db = db

    def read(self, fn: Callable[[Tx], T]) -> T:
        return self._db.run(lambda conn: fn(PgTx(conn)), transactional=False, reads_only=True)

    def write(self, fn: Callable[[Tx], T]) -> T:
        return self._db.run(lambda conn: fn(PgTx(conn)), transactional=True)

    def snapshot(self, fn: Callable[[Tx], T]) -> T:
        def body(conn: Conn) -> T:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return fn(PgTx(conn))

        return self._db.run(body, transactional=True, reads_only=True)

    def claim(self, tx: Tx, params: Params) -> tuple[rows.Row, rows.Row] | None:
        """``CLAIM``: one statement claims the task and opens its run."""
        row = tx.one(CLAIM, params)
        if row is None:
            return None
        return row, {"id": row["run_id"], "attempt": row["run_attempt"]}

    def replace_loop_value(self, tx: Tx, key: str, expected: object, value: object) -> bool:
        """Write ``value`` only over ``expected``, compared as ``jsonb`` in one statement."""
        sql = REPLACE_ABSENT_LOOP_VALUE if expected is None else REPLACE_LOOP_VALUE
        return tx.one(sql, {"key": key, "expected": json.dumps(expected), "value": json.dumps(value)}) is not None


class PgDatabase:
    """The pool, the listening session and the transaction helpers of one store."""

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        changes: Changes,
        where: str,
        last_used: weakref.WeakKeyDictionary[Conn, float],
    ) -> None:
        self._pool = pool
        self._changes = changes
        self._last_used = last_used  # when each pooled session last did work (monotonic s)
        self.where = where

    @classmethod
    async def open(cls, url: str, *, pool_max: int = POOL_MAX, lock_timeout_ms: int = 5000) -> PgDatabase:
        """Connect, migrate the schema and start listening. ``lock_timeout_ms``: how
        long a pooled session's statement waits for a lock before the unit of work
        is retried. Raises ``StoreError`` (a down server, a refused login, a wrong
        URL) or ``SchemaTooNew``."""
        where = describe(url)
        try:
            first = await psycopg.AsyncConnection.connect(
                url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name="vigil", **KEEPALIVES
            )
        except psycopg.Error as err:
            raise connect_failure(err, where) from None
        try:
            await migrate(first, where)
            await first.execute(SQL_LISTEN)  # before open returns: no change is missed
        except psycopg.Error as err:
            await first.close()
            raise translate(err, where) from None
        except BaseException:
            await first.close()
            raise
        try:
            pool, own_pids, last_used = await asyncio.to_thread(_open_pool, url, pool_max, lock_timeout_ms)
        except (PoolTimeout, psycopg.Error) as err:
            await first.close()
            raise connect_failure(err, where) from None
        return cls(pool, Changes(url, first, own_pids), where, last_used)

    def data_version(self) -> int:
        return self._changes.version()

    async def read(self, fn: Callable[[Conn], T]) -> T:
        """Run read-only ``fn`` on a pooled autocommit connection (each statement sees
        what is committed when it starts). A pooled session the server ended (a
        restart) is replaced and the read tried again, once."""
        return await asyncio.to_thread(self.run, fn, transactional=False, reads_only=True)

    def run(
        self,
        fn: Callable[[Conn], T],
        *,
        transactional: bool,
        reads_only: bool = False,
    ) -> T:
        """Run ``fn`` on a pooled session in the caller's thread (blocking): in one
        transaction (``transactional``), rolled back on any exception and retried
        whole on a serialization failure, deadlock or lock timeout (then
        ``StoreBusy``); else in autocommit, each statement on its own snapshot.
        ``reads_only``: a session the server ended (a restart) is replaced and
        ``fn`` tried again, once; a write is never replayed after a lost
        connection (it may have committed)."""
        lost_once = False
        for attempt in range(BUSY_RETRIES + 1):
            try:
                with self._pool.connection() as conn:
                    try:
                        if not transactional:
                            return fn(conn)
                        with conn.transaction():
                            return fn(conn)
                    finally:
                        self._last_used[conn] = time.monotonic()
            except psycopg.OperationalError as err:
                if not (reads_only and not lost_once and _is_connection_error(err)):
                    raise translate(err, self.where) from None
                lost_once = True
                continue  # the pool has discarded the dead session
            except psycopg.Error as err:
                if not _retryable(err) or attempt == BUSY_RETRIES:
                    raise translate(err, self.where) from None
            except PoolTimeout:
                raise StoreBusy(f"no connection to PostgreSQL at {self.where} became free in time") from None
            time.sleep(BUSY_BACKOFF_S * (2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self._changes.close()
        await asyncio.to_thread(self._pool.close)


def _open_pool(
    url: str, pool_max: int, lock_timeout_ms: int
) -> tuple[ConnectionPool[Conn], set[int], weakref.WeakKeyDictionary[Conn, float]]:
    """The store's pool of blocking sessions, open (blocks until the first connects);
    also the backend pids of its sessions and when each was last used."""
    own_pids: set[int] = set()
    last_used: weakref.WeakKeyDictionary[Conn, float] = weakref.WeakKeyDictionary()

    def configure(conn: Conn) -> None:
        own_pids.add(conn.info.backend_pid)
        # A SET rather than a startup option: connection poolers refuse those.
        # Not on the first session: a migration may rightly wait for another's.
        conn.execute(f"SET lock_timeout = {int(lock_timeout_ms)}")

    def check(conn: Conn) -> None:
        # Only a session idle for a while may have been ended by the server (a
        # restart): probe it before use, and the pool replaces it if dead. A busy
        # dispatcher's sessions are never idle that long and pay nothing.
        if time.monotonic() - last_used.get(conn, 0.0) > IDLE_PROBE_S:
            conn.execute("")

    pool: ConnectionPool[Conn] = ConnectionPool(
        url,
        min_size=1,
        max_size=pool_max,
        kwargs={"autocommit": True, "row_factory": dict_row, "application_name": "vigil", **KEEPALIVES},
        configure=configure,
        check=check,
        open=False,
        timeout=CONNECT_TIMEOUT_S,
        name="vigil-store",
    )
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    except BaseException:
        pool.close()
        raise
    return pool, own_pids, last_used
