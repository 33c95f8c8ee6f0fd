"""The SQLite connection every Vigil process uses, and its transaction helpers.

The store's rules (docs/store.md, "Guarantees") enforced here, once:

* one ``connect()`` with checked pragmas: WAL, ``synchronous=FULL`` (durable) unless
  configured, ``foreign_keys=ON``, ``busy_timeout``; SQLite ≥ 3.35 (RETURNING);
* the file is created 0600 in a 0700 folder before SQLite touches it;
* every write starts with ``BEGIN IMMEDIATE``; from asyncio (``Database``) the whole
  body runs in one hop to the connection's own thread, so no transaction is ever
  open across an await: a cancelled caller cannot leave a transaction behind, and
  each unit of work costs one thread hop instead of one per statement; a one-shot
  command (``Connection``) runs the same bodies with no event loop and no thread;
* ``SQLITE_BUSY`` that outlives ``busy_timeout`` is retried as a whole unit with
  jittered backoff, then raised as ``StoreBusy``;
* driver errors become ``vigil.errors`` types here and nowhere else (through
  ``errors.translate``);
* a connection stays on the file it opened: each unit of work first checks (one
  ``stat``) that the path still names that file, and raises ``DatabaseReplaced``
  once it was removed or replaced (a restore), so that a process never writes on to
  a file nobody reads, nor logs beside the new one (``Connection.check_file``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from vigil.errors import (
    DatabaseReplaced,
    InputError,
    StoreBusy,
    StoreError,
    StoreMoved,
)
from vigil.store.rows import Row
from vigil.store.sql.runs import CLAIM, OPEN_RUN
from vigil.store.sql.state import LOOP_VALUE, SET_LOOP_VALUE
from vigil.store.sqlite.backup import write_backup
from vigil.store.sqlite.errors import is_busy, translate
from vigil.store.sqlite.schema import refuse_if_moved
from vigil.store.transaction import Params, Sql, Tx

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

T = TypeVar("T")
FileCheck = Callable[[sqlite3.Connection, Path], None]

MIN_SQLITE = (3, 35, 0)
BUSY_RETRIES = 5
BUSY_BACKOFF_S = 0.05
# When a connection restarts the write-ahead log it cuts the file back to this size:
# without it a log that once grew (a stuck reader, a big batch) keeps its size on
# disk forever. Twice the automatic checkpoint's 1000 pages, so the steady log is
# not cut and grown again on every restart.
JOURNAL_SIZE_LIMIT_BYTES = 8 * 1024 * 1024
# A TRUNCATE checkpoint holds off writers while it waits for older readers to
# finish: long enough for short read transactions to end, short enough that a
# writer waiting behind it (busy_timeout: seconds) never notices.
TRUNCATE_WAIT_MS = 200
OPEN_BUSY_PAUSE_S = 0.02  # between attempts to configure a new file another process is configuring
SWAP_RETRIES = 5  # opens of a path whose file a restore swapped meanwhile


def _prepare_file(path: Path) -> None:
    """Create the folder 0700 and the file 0600 if missing (SQLite would use the umask)."""
    if not path.parent.exists():
        # exist_ok: another process opening the same new home may create it first.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


FileIdentity = tuple[int, int]  # (st_dev, st_ino): which file a path names now


def file_identity(path: Path) -> FileIdentity | None:
    """Which file ``path`` names now; None when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


class _Swapped(Exception):
    """The path was given another file while this connection was being opened."""


def _configure(
    conn: sqlite3.Connection,
    path: Path,
    *,
    synchronous: str,
    busy_timeout_ms: int,
    check: FileCheck | None,
    identity: FileIdentity | None,
) -> None:
    """Run ``check``, then set and verify the pragmas. Runs in the connection's thread.
    Raises ``_Swapped`` when ``path`` no longer names the file of ``identity`` (the
    one this connection opened, known before it did)."""
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise StoreError(f"SQLite {sqlite3.sqlite_version} is too old; Vigil needs 3.35 or newer")
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if check is not None:
        check(conn, path)  # before WAL: switching the journal mode rewrites the header
    else:
        conn.execute("PRAGMA schema_version").fetchone()
    # The first read waited for any lock a restore held while it swapped the files.
    # A connection left on the replaced file must not go on to WAL mode: its log
    # would be named after the path, beside the new file, which would replay it.
    if file_identity(path) != identity:
        raise _Swapped
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StoreError(f"{path}: could not enable WAL (journal_mode is {mode})")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT_BYTES}")
    expected = {
        "synchronous": {"FULL": 2, "NORMAL": 1}[synchronous],
        "foreign_keys": 1,
        "journal_size_limit": JOURNAL_SIZE_LIMIT_BYTES,
    }
    for pragma, want in expected.items():
        got = conn.execute(f"PRAGMA {pragma}").fetchone()[0]
        if got != want:
            raise StoreError(f"{path}: PRAGMA {pragma} is {got}, expected {want}")


class Connection:
    """One sqlite3 connection with Vigil's pragmas, used from one thread at a time.

    ``write(fn)`` runs ``fn(conn)`` inside ``BEGIN IMMEDIATE … COMMIT`` (rollback on
    any exception); ``read(fn)`` runs ``fn(conn)`` outside a write transaction. Both
    retry the whole body when the file stays locked past ``busy_timeout``. A
    one-shot command uses this directly; long-running processes use ``Database``.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, identity: FileIdentity | None = None) -> None:
        self._sqlite = conn
        self.path = path
        self.identity = identity  # the file opened; None: not known (not checked)
        self._log_released = False  # the log was emptied after the file was replaced
        self._moved: str | None = None  # why: the file was moved into PostgreSQL (seen by a transaction)

    @classmethod
    def open(
        cls, path: Path, *, synchronous: str = "FULL", busy_timeout_ms: int = 5000, check: FileCheck | None = None
    ) -> Connection:
        """Connect to ``path`` (created 0600 if missing). ``check(conn, path)`` may
        refuse the file by raising, before anything is written to it."""
        if synchronous not in ("FULL", "NORMAL"):
            raise StoreError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        try:
            _prepare_file(path)
        except OSError as err:
            raise StoreError(f"cannot create database {path}: {err.strerror}") from None
        for _ in range(SWAP_RETRIES):
            identity = file_identity(path)
            try:
                # check_same_thread off: a Database opens it in its worker thread and may
                # close it from there too, but never uses it from two threads at once.
                conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            except sqlite3.Error as err:
                raise translate(err, path) from None
            try:
                return cls._configured(
                    conn, path, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms, check=check, identity=identity
                )
            except _Swapped:
                conn.close()  # opened just before a restore swapped the file: open the new one
        raise StoreError(f"{path} keeps being replaced while it is opened; try again")

    @classmethod
    def _configured(
        cls,
        conn: sqlite3.Connection,
        path: Path,
        *,
        synchronous: str,
        busy_timeout_ms: int,
        check: FileCheck | None,
        identity: FileIdentity | None,
    ) -> Connection:
        deadline = time.monotonic() + busy_timeout_ms / 1000
        while True:
            try:
                _configure(
                    conn, path, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms, check=check, identity=identity
                )
                return cls(conn, path, identity)
            except sqlite3.OperationalError as err:
                # Processes opening a new file at once: switching it to WAL can report
                # busy at once, without waiting in the busy handler, while another one
                # switches it. Every step of _configure can simply run again.
                if is_busy(err) and time.monotonic() < deadline:
                    time.sleep(OPEN_BUSY_PAUSE_S * (0.5 + random.random()))
                    continue
                conn.close()
                raise translate(err, path) from None
            except sqlite3.Error as err:
                conn.close()
                raise translate(err, path) from None
            except _Swapped:
                raise
            except BaseException:
                conn.close()
                raise

    def file_problem(self, *, with_log: bool = False) -> str | None:
        """Why this connection must not go on, or None: the path no longer names the
        file it has open (removed, or replaced by a restore), or (``with_log``) the
        write-ahead log was deleted under it. One or two ``stat`` calls."""
        if self._moved is not None:
            return self._moved
        if self.identity is None:
            return None
        now = file_identity(self.path)
        if now != self.identity:
            what = "removed" if now is None else "replaced by another file"
            return (
                f"the database file {self.path} was {what} while this process had it open; "
                "nothing more is written to the old one: start again to use the file now there"
            )
        if with_log and not Path(f"{self.path}-wal").exists():
            return (
                f"the write-ahead log {self.path}-wal was deleted while this process had the database open; "
                "stopping, so that closing writes its changes back into the database: start again then"
            )
        return None

    def check_file(self) -> None:
        """Raise ``DatabaseReplaced`` when the path no longer names the file this
        connection has open: nothing more may be written to it. Run in the
        connection's thread."""
        if self._moved is not None:
            raise StoreMoved(self._moved)
        problem = self.file_problem()
        if problem is not None:
            self._let_go_of_log()
            raise DatabaseReplaced(problem)

    def _let_go_of_log(self) -> None:
        """Once the file was replaced or removed, empty this connection's write-ahead
        log into the old file (a ``TRUNCATE`` checkpoint). The log is named after the
        path, so it now lies beside the new file, whose next opener would replay it
        onto itself; and SQLite does not checkpoint a moved file when it closes. A
        reader of the old file that holds the log is waited for briefly; past that,
        nothing more can be done."""
        if self._log_released or file_identity(self.path) == self.identity:
            return
        self._log_released = True
        with contextlib.suppress(sqlite3.Error):
            self._sqlite.execute(f"PRAGMA busy_timeout = {TRUNCATE_WAIT_MS}")
            self._sqlite.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a read-only body (autocommit: each statement sees committed data)."""
        return self._retrying(fn, transactional=False)

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in ``BEGIN IMMEDIATE … COMMIT``; roll back on any exception."""
        return self._retrying(fn, transactional=True)

    def _retrying(self, fn: Callable[[sqlite3.Connection], T], *, transactional: bool) -> T:
        body = _in_transaction if transactional else _plain

        def unless_moved(conn: sqlite3.Connection) -> T:
            # Every read and write, not only the opening: a process that opened the
            # file before `vigil store migrate` marked it must not go on using it.
            refuse_if_moved(conn, self.path)
            return fn(conn)

        self.check_file()
        for attempt in range(BUSY_RETRIES + 1):
            try:
                return body(self._sqlite, unless_moved)
            except StoreMoved as moved:
                self._moved = str(moved)  # file_problem() says it too: the daemon's watcher stops
                raise
            except sqlite3.OperationalError as err:
                if not is_busy(err) or attempt == BUSY_RETRIES:
                    raise translate(err, self.path) from None
            except sqlite3.Error as err:
                raise translate(err, self.path) from None
            except OverflowError:
                # the driver's own refusal of an integer beyond 64 bits (rolled back)
                raise InputError(f"a number is too large for the database (at most {2**63 - 1})") from None
            except UnicodeEncodeError:
                # a lone surrogate (undecodable bytes, a "\ud800" escape) in text (rolled back)
                raise InputError("text that is not valid UTF-8 cannot be stored (a lone surrogate)") from None
            # Busy past busy_timeout: another writer held the lock for seconds.
            time.sleep(BUSY_BACKOFF_S * (2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")

    def backup(self, target: Path) -> None:
        """Copy the whole database to ``target`` with SQLite's online backup API, under
        a temporary name renamed into place only when complete and synced
        (``backup.write_backup``). Raises ``InputError`` for a target folder
        that does not exist or a target that is not an SQLite file, else
        ``StoreError`` naming both files."""
        self.check_file()
        try:
            write_backup(self._sqlite, target)
        except sqlite3.Error as err:
            failure = translate(err, target)
            if isinstance(failure, StoreBusy):
                raise failure from None
            # Name both files: "not a database" here is about the target, never the source.
            raise StoreError(f"cannot back up {self.path} to {target}: {err}") from None
        except OSError as err:
            raise StoreError(f"cannot back up {self.path} to {target}: {err.strerror}") from None

    def close(self) -> None:
        if self.identity is not None:
            self._let_go_of_log()
        self._sqlite.close()


class SqliteTx:
    """``Tx`` on a sqlite3 connection (JSON columns are text here)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._sqlite = conn

    @staticmethod
    def _text(sql: Sql) -> str:
        if sql.sqlite is None:
            raise TypeError("a statement with nothing to run on SQLite returns no rows")
        return sql.sqlite

    def one(self, sql: Sql, params: Params | None = None) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._sqlite.execute(self._text(sql), params or {}).fetchone()
        return row

    def all(self, sql: Sql, params: Params | None = None) -> list[sqlite3.Row]:
        return self._sqlite.execute(self._text(sql), params or {}).fetchall()

    def run(self, sql: Sql, params: Params | None = None) -> int:
        if sql.sqlite is None:
            return 0
        return self._sqlite.execute(sql.sqlite, params or {}).rowcount

    def many(self, sql: Sql, rows: Iterable[Params]) -> None:
        if sql.sqlite is not None:
            self._sqlite.executemany(sql.sqlite, rows)

    def loads(self, value: Any) -> Any:
        return json.loads(value)

    def dumps(self, value: object) -> str:
        return json.dumps(value)

    def array(self, values: Sequence[object]) -> str:
        return json.dumps(list(values))


class SqliteEngine:
    """``Engine`` on a ``Connection``: runs behaviours in the caller's thread."""

    def __init__(self, conn: Connection) -> None:
        self._connection = conn

    def read(self, fn: Callable[[Tx], T]) -> T:
        return self._connection.read(lambda conn: fn(SqliteTx(conn)))

    def write(self, fn: Callable[[Tx], T]) -> T:
        return self._connection.write(lambda conn: fn(SqliteTx(conn)))

    def snapshot(self, fn: Callable[[Tx], T]) -> T:
        return self._connection.read(lambda conn: _in_snapshot(conn, lambda c: fn(SqliteTx(c))))

    def claim(self, tx: Tx, params: Params) -> tuple[Row, Row] | None:
        """Claim the most urgent due task (``CLAIM``) and open its run (``OPEN_RUN``):
        two statements in the caller's ``BEGIN IMMEDIATE`` transaction."""
        row = tx.one(CLAIM, params)
        if row is None:
            return None
        run = tx.one(OPEN_RUN, {**params, "task_id": row["id"]})
        assert run is not None
        return row, run

    def replace_loop_value(self, tx: Tx, key: str, expected: object, value: object) -> bool:
        """Write ``value`` only over ``expected``, compared as Python values (JSON text
        may differ in spacing or key order); BEGIN IMMEDIATE makes it atomic."""
        row = tx.one(LOOP_VALUE, {"key": key})
        if (None if row is None else tx.loads(row["value"])) != expected:
            return False
        tx.run(SET_LOOP_VALUE, {"key": key, "value": tx.dumps(value)})
        return True


class Database:
    """A ``Connection`` used from asyncio: each call runs whole in the connection's
    own worker thread, one hop per unit of work, so no transaction is ever open
    across an await, and a cancelled caller cannot leave one behind (the body runs
    to its commit or rollback). The one thread also serialises the calls.
    """

    def __init__(self, conn: Connection, worker: ThreadPoolExecutor) -> None:
        self.connection = conn  # use it only through call(), in the worker thread
        self._worker = worker
        self.path = conn.path

    @classmethod
    async def open(
        cls, path: Path, *, synchronous: str = "FULL", busy_timeout_ms: int = 5000, check: FileCheck | None = None
    ) -> Database:
        """``Connection.open`` in a new worker thread; raises as it does."""
        # Imported here, not above: a one-shot command uses Connection alone, and
        # these two bring logging, queues and the event loop with them.
        import asyncio
        from concurrent.futures import ThreadPoolExecutor

        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vigil-sqlite")
        opening = functools.partial(
            Connection.open, path, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms, check=check
        )
        try:
            conn = await asyncio.get_running_loop().run_in_executor(worker, opening)
        except BaseException:
            worker.shutdown(wait=False)
            raise
        return cls(conn, worker)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in the connection's thread: one hop."""
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(self._worker, functools.partial(fn, *args, **kwargs))

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``Connection.read`` in the connection's thread."""
        return await self.call(self.connection.read, fn)

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``Connection.write`` in the connection's thread."""
        return await self.call(self.connection.write, fn)

    async def backup(self, target: Path) -> None:
        """``Connection.backup`` in the connection's thread."""
        await self.call(self.connection.backup, target)

    async def close(self) -> None:
        await self.call(self.connection.close)
        self._worker.shutdown(wait=False)


def _plain(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    return fn(conn)


def _in_snapshot(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """``fn`` in one deferred read transaction: every statement sees the database as
    of the first one (WAL: it never blocks a writer, nor waits for one)."""
    conn.execute("BEGIN")
    try:
        return fn(conn)
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def _in_transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result
