"""Query plans, read on the store's own connection: for the tests that hold a
statement to the index it must use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vigil.store.postgres import PostgresStore
from vigil.store.sqlite import SqliteStore
from vigil.store.transaction import Sql


async def sqlite_plan(store: SqliteStore, sql: Sql | str, params: Mapping[str, object] | Sequence[object]) -> list[str]:
    """``EXPLAIN QUERY PLAN`` of ``sql`` (a statement's SQLite text): one detail line per step."""
    text = sql.sqlite if isinstance(sql, Sql) else sql
    assert text is not None
    rows = await store._db.read(lambda conn: conn.execute("EXPLAIN QUERY PLAN " + text, params).fetchall())
    return [str(row["detail"]) for row in rows]


async def postgres_plan(store: PostgresStore, sql: Sql, params: Mapping[str, object]) -> list[str]:
    """``EXPLAIN`` of ``sql``'s PostgreSQL text: its text lines."""
    text = sql.postgres
    assert text is not None
    rows = await store._db.read(lambda conn: conn.execute("EXPLAIN " + text, dict(params)).fetchall())
    return [str(row["QUERY PLAN"]) for row in rows]
