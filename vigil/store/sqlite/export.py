"""Reading a whole SQLite home out, for ``vigil store migrate``.

``SqliteExport`` opens the file read-only and holds one read transaction for its
whole life, so every table is read from the same snapshot even while other
processes write (a write committed after the snapshot is not part of the copy).
Tables and columns are discovered from the file itself, so a table added by a later
schema version is copied without changes here. ``status_counts`` is left out: it
is derived from ``tasks`` and the target keeps its own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vigil.errors import StoreError

# Derived or internal tables: never copied.
SKIPPED_TABLES = frozenset({"status_counts", "sqlite_sequence"})
# Copied first, in id order: every other table refers to tasks, and a task's parent
# is an older task (a lower id).
FIRST_TABLES = ("tasks",)
# Columns whose totals are compared after a copy (money and tokens).
TOTAL_COLUMNS = ("cost_usd", "api_cost_usd", "tokens_in", "tokens_out", "cache_read_tokens", "cache_write_tokens")

SQL_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
SQL_STATUS_TOTALS = "SELECT status, count(*) FROM tasks GROUP BY status"


@dataclass(frozen=True)
class TableTotals:
    """A table's row count and the sums of its ``TOTAL_COLUMNS`` (absent: not in it)."""

    rows: int
    sums: dict[str, float]


class SqliteExport:
    """One read-only snapshot of a Vigil SQLite file. Use as a context manager."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise StoreError(f"no database at {path}; nothing to migrate")
        self.path = path
        try:
            self._reader = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None)
            # One deferred transaction: its first read fixes the snapshot for every table.
            self._reader.execute("BEGIN")
            self._tables = [row[0] for row in self._reader.execute(SQL_TABLES)]
        except sqlite3.Error as err:
            raise StoreError(f"cannot read {path}: {err}") from None

    def __enter__(self) -> SqliteExport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._reader.close()

    def tables(self) -> list[str]:
        """The tables to copy, in a safe order: ``tasks`` first, then the rest as created."""
        wanted = [t for t in self._tables if t not in SKIPPED_TABLES]
        return [t for t in FIRST_TABLES if t in wanted] + [t for t in wanted if t not in FIRST_TABLES]

    def columns(self, table: str) -> list[str]:
        """The table's column names, in their declared order."""
        return [row[1] for row in self._reader.execute(f"PRAGMA table_info({_quoted(table)})")]

    def totals(self, table: str) -> TableTotals:
        """Row count and money/token sums of ``table``, from the snapshot."""
        summed = [c for c in TOTAL_COLUMNS if c in self.columns(table)]
        select = ", ".join(["count(*)", *(f"coalesce(total({_quoted(c)}), 0)" for c in summed)])
        row = self._reader.execute(f"SELECT {select} FROM {_quoted(table)}").fetchone()
        return TableTotals(int(row[0]), {c: float(v) for c, v in zip(summed, row[1:], strict=True)})

    def status_totals(self) -> dict[str, int]:
        """How many tasks have each status (only statuses that occur)."""
        return {str(status): int(n) for status, n in self._reader.execute(SQL_STATUS_TOTALS)}

    def rows(self, table: str, columns: list[str], *, batch: int = 5000) -> Iterator[list[tuple[object, ...]]]:
        """The table's rows as tuples of ``columns``, ``batch`` at a time; rowid tables
        in rowid (id) order."""
        names = ", ".join(_quoted(c) for c in columns)
        order = " ORDER BY rowid" if self._has_rowid(table) else ""
        cursor = self._reader.execute(f"SELECT {names} FROM {_quoted(table)}{order}")
        while chunk := cursor.fetchmany(batch):
            yield [tuple(row) for row in chunk]

    def _has_rowid(self, table: str) -> bool:
        try:
            self._reader.execute(f"SELECT rowid FROM {_quoted(table)} LIMIT 0")
        except sqlite3.OperationalError:  # a WITHOUT ROWID table
            return False
        return True


def _quoted(name: str) -> str:
    """An identifier quoted for SQL (names come from the file's own schema)."""
    return '"' + name.replace('"', '""') + '"'
