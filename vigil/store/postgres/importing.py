"""Writing a whole home into an empty PostgreSQL database, for ``vigil store migrate``.

``PostgresImport`` holds one connection and one transaction: every table is copied
with ``COPY … FROM STDIN`` (ids kept), the identity sequences are moved past the
copied ids, and the totals are read back inside the same transaction, so a copy
that does not verify is rolled back and leaves the database as empty as it was.

The session sets ``vigil.copying`` (see ``schema``): the insert triggers
then add no ``created`` events and no dependency counts of their own, since the
copied rows already carry them, while the status counts follow the copied rows.
The schema itself is created beforehand by opening the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg import sql

from vigil.errors import InputError, StoreError
from vigil.store.postgres.db import CONNECT_TIMEOUT_S, connect_failure, describe, translate
from vigil.store.postgres.schema import SQL_RESET_IDENTITIES
from vigil.store.sqlite.export import TOTAL_COLUMNS, TableTotals

SQL_COLUMNS = """
SELECT table_name, column_name FROM information_schema.columns
WHERE table_schema = current_schema()
ORDER BY table_name, ordinal_position
"""
SQL_STATUS_TOTALS = "SELECT status, n FROM status_counts WHERE n <> 0"


class PostgresImport:
    """One transaction on the target database. Open with ``await PostgresImport.open(url)``;
    ``commit()`` or ``rollback()`` ends it (``close()`` without a commit rolls back)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], where: str, columns: dict[str, list[str]]) -> None:
        self._session = conn
        self.where = where
        self._columns = columns

    @classmethod
    async def open(cls, url: str) -> PostgresImport:
        """Connect and begin the copy's transaction. Raises ``StoreError`` when the
        server cannot be used."""
        where = describe(url)
        try:
            conn = await psycopg.AsyncConnection.connect(url, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as err:
            raise connect_failure(err, where) from None
        try:
            await conn.execute("SET LOCAL vigil.copying = 'on'")
            columns: dict[str, list[str]] = {}
            async with conn.cursor() as cur:
                await cur.execute(SQL_COLUMNS)
                for table, column in await cur.fetchall():
                    columns.setdefault(str(table), []).append(str(column))
        except psycopg.Error as err:
            await conn.close()
            raise translate(err, where) from None
        return cls(conn, where, columns)

    def has_table(self, table: str) -> bool:
        return table in self._columns

    def check_columns(self, table: str, columns: list[str]) -> None:
        """Raise ``StoreError`` if the target cannot hold ``columns`` of ``table``
        (a home written by a newer Vigil than the PostgreSQL schema knows)."""
        have = self._columns.get(table)
        if have is None:
            raise StoreError(f"{self.where} has no table {table!r}; this Vigil's PostgreSQL schema cannot hold it")
        missing = [c for c in columns if c not in have]
        if missing:
            raise StoreError(f"{self.where}: table {table!r} has no column {missing[0]!r}; nothing was copied")

    async def refuse_unless_empty(self, tables: Iterable[str]) -> None:
        """Raise ``InputError`` naming the tables that already have rows."""
        full = []
        for table in tables:
            if table in self._columns and await self._scalar(
                sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(sql.Identifier(table))
            ):
                full.append(table)
        if full:
            raise InputError(
                f"{self.where} is not empty (rows in {', '.join(full)}); migrate copies into an empty "
                "database only: nothing was copied"
            )

    async def copy_rows(self, table: str, columns: list[str], rows: Iterable[tuple[object, ...]]) -> int:
        """Append ``rows`` (tuples of ``columns``) to ``table``; returns how many."""
        statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        count = 0
        try:
            async with self._session.cursor() as cur, cur.copy(statement) as copy:
                for row in rows:
                    await copy.write_row(row)
                    count += 1
        except psycopg.Error as err:
            raise translate(err, self.where) from None
        return count

    async def reset_identities(self) -> None:
        """Move every id sequence past the largest copied id."""
        try:
            for statement in SQL_RESET_IDENTITIES:
                await self._session.execute(statement)
        except psycopg.Error as err:
            raise translate(err, self.where) from None

    async def totals(self, table: str) -> TableTotals:
        """Row count and money/token sums of ``table`` as the transaction sees it."""
        summed = [c for c in TOTAL_COLUMNS if c in self._columns.get(table, [])]
        parts = [sql.SQL("count(*)")] + [
            sql.SQL("coalesce(sum({}), 0)::double precision").format(sql.Identifier(c)) for c in summed
        ]
        statement = sql.SQL("SELECT {} FROM {}").format(sql.SQL(", ").join(parts), sql.Identifier(table))
        row = await self._row(statement)
        return TableTotals(int(row[0]), {c: float(v) for c, v in zip(summed, row[1:], strict=True)})

    async def status_totals(self) -> dict[str, int]:
        """Tasks per status from the trigger-kept counts (only statuses that occur)."""
        try:
            async with self._session.cursor() as cur:
                await cur.execute(SQL_STATUS_TOTALS)
                return {str(status): int(n) for status, n in await cur.fetchall()}
        except psycopg.Error as err:
            raise translate(err, self.where) from None

    async def commit(self) -> None:
        try:
            await self._session.commit()
        except psycopg.Error as err:
            raise translate(err, self.where) from None

    async def close(self) -> None:
        """Roll back whatever was not committed and disconnect."""
        await self._session.close()

    async def _scalar(self, statement: sql.Composed) -> object:
        return (await self._row(statement))[0]

    async def _row(self, statement: sql.Composed) -> tuple[Any, ...]:
        try:
            async with self._session.cursor() as cur:
                await cur.execute(statement)
                row = await cur.fetchone()
        except psycopg.Error as err:
            raise translate(err, self.where) from None
        assert row is not None
        return tuple(row)
