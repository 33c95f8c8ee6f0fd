"""``vigil store migrate``: move a home's SQLite file into an empty PostgreSQL database.

The steps, in order:

1. open both stores the normal way (the SQLite file is brought to this Vigil's
   schema; the PostgreSQL database gets the schema if it has none);
2. take SQLite's write lock and hold it until the copy is committed: whatever tries
   to write meanwhile (a person's ``vigil task add``, a standby's sensors) waits and
   is then refused as busy, instead of writing what the copy would leave behind.
   The caller holds every dispatcher lane around all this (``vigil store migrate``
   does), so no dispatcher runs a task meanwhile, and a dead one is told from a live
   one at once by its lock, not by the age of its heartbeat;
3. read the SQLite file through one read-only snapshot (``sqlite.export``);
4. refuse a target that has rows in any table to be copied;
5. in one PostgreSQL transaction (``postgres.importing``): copy every table with its
   ids, move the id sequences past them, read the totals back and compare them with
   the snapshot's (rows per table, money and tokens, tasks per status); commit only
   when they match.

6. in the SQLite transaction held since step 2, mark the file moved (``PRAGMA
   user_version`` beyond any schema, and where it went): from then on every Vigil
   process refuses to read or write it, one that had it open included, and says
   where the home's store went; a Vigil from before the mark refuses it as too new.

The copy does not change the SQLite file's data: it stays as it was, a backup of the
moment of the move (docs/scaling.md).
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from vigil.clock import SystemClock
from vigil.config import Settings
from vigil.errors import StoreBusy, StoreError
from vigil.store.opening import open_store
from vigil.store.sqlite.export import SqliteExport, TableTotals
from vigil.store.sqlite.schema import mark_moved
from vigil.store_url import mask_password

# (table, rows copied so far, rows to copy): called after each batch and once per table.
Progress = Callable[[str, int, int], None]
BATCH_ROWS = 5000
PROGRESS_EVERY = 50_000  # rows between progress lines of one table (a multiple of BATCH_ROWS)


@dataclass(frozen=True)
class TableCopy:
    """What was copied into one table, as verified on the target."""

    table: str
    totals: TableTotals


async def migrate_home(settings: Settings, target_url: str, progress: Progress) -> list[TableCopy]:
    """Copy the home's SQLite store into the empty PostgreSQL database at
    ``target_url``; returns the verified totals per table, in copy order.

    Atomic on the target: all rows are committed or none. Raises ``InputError`` for a
    target that is not empty, ``StoreBusy`` when another process keeps writing the
    SQLite file, ``StoreError`` when either side cannot be used or the copy does not
    verify (then nothing was committed)."""
    source = settings.store.path
    if not source.is_file():
        raise StoreError(f"no database at {source}; nothing to migrate")
    sqlite_settings = replace(settings, store=replace(settings.store, url=None))
    await (await open_store(sqlite_settings)).close()  # brings an older file to this schema
    target_settings = replace(settings, store=replace(settings.store, url=target_url))
    await (await open_store(target_settings)).close()  # creates the schema when missing
    with _writers_held_off(source, settings.store.busy_timeout_ms) as held:
        copies = await _copy_all(source, target_url, progress)
        # Still under the write lock the copy held: no write slips in between.
        mark_moved(held, mask_password(target_url), SystemClock().now_ms())
        held.execute("COMMIT")
    return copies


@contextlib.contextmanager
def _writers_held_off(path: Path, busy_timeout_ms: int) -> Iterator[sqlite3.Connection]:
    """Hold SQLite's write lock on ``path`` for the block (waiting up to the busy
    timeout for a writer to finish). This is the one place a transaction stays open
    across awaits, on purpose: it is what keeps the file still while it is copied."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
    try:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as err:
            raise StoreBusy(f"{path} stayed locked by another writer ({err}); try again") from None
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()


async def _copy_all(source: Path, target_url: str, progress: Progress) -> list[TableCopy]:
    from vigil.store.postgres.importing import PostgresImport

    with SqliteExport(source) as export:
        target = await PostgresImport.open(target_url)
        try:
            expected = {table: export.totals(table) for table in export.tables()}
            # An empty table the target does not know (a newer SQLite schema) loses nothing.
            tables = [t for t in expected if expected[t].rows or target.has_table(t)]
            columns = {table: export.columns(table) for table in tables}
            for table in tables:
                target.check_columns(table, columns[table])
            await target.refuse_unless_empty(tables)
            for table in tables:
                copied = 0
                for batch in export.rows(table, columns[table], batch=BATCH_ROWS):
                    copied += await target.copy_rows(table, columns[table], batch)
                    progress(table, copied, expected[table].rows)
                if copied == 0:
                    progress(table, 0, 0)
            await target.reset_identities()
            copies = [TableCopy(table, await target.totals(table)) for table in tables]
            for copy in copies:
                _verify(copy.table, expected[copy.table], copy.totals)
            want, got = export.status_totals(), await target.status_totals()
            if want != got:
                raise StoreError(f"the copy did not verify: tasks per status {want} became {got}; nothing was copied")
            await target.commit()
        finally:
            await target.close()
    return copies


def _verify(table: str, want: TableTotals, got: TableTotals) -> None:
    if want.rows != got.rows:
        raise StoreError(f"the copy did not verify: {table} has {got.rows} rows, not {want.rows}; nothing was copied")
    for column, value in want.sums.items():
        # REAL sums differ in the last bits when added up in another order
        if not math.isclose(value, got.sums.get(column, math.nan), rel_tol=1e-9, abs_tol=1e-9):
            raise StoreError(
                f"the copy did not verify: {table}.{column} totals {got.sums.get(column)}, not {value}; "
                "nothing was copied"
            )


def progress_line(table: str, copied: int, total: int) -> str | None:
    """The line to print for a progress report: each table once when done, and every
    ``PROGRESS_EVERY`` rows of a long one; None for nothing."""
    if copied == total:
        return f"  {table:<14} {copied:>10,} rows"
    if copied % PROGRESS_EVERY == 0:
        return f"  {table:<14} {copied:>10,} of {total:,} rows…"
    return None


def summary(copies: list[TableCopy], location: str) -> str:
    """What was verified and what to change in vigil.toml (``location``: the URL,
    password masked)."""
    by_table = {c.table: c.totals for c in copies}
    runs = by_table.get("runs")
    spent = f", ${runs.sums.get('cost_usd', 0.0):.4f} over {runs.rows} runs" if runs is not None else ""
    return f"""\
verified: row counts and cost totals match on both sides ({sum(c.totals.rows for c in copies):,} rows{spent})
the SQLite file is marked moved: no Vigil process reads or writes it now; keep it as a backup of this moment.
next: point every Vigil process of this home at the database, in vigil.toml:
  [store]
  url = "{location}"
or, to keep the password out of the file, set VIGIL_STORE_URL in their environment instead."""
