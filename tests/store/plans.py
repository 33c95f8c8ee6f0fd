"""Query plans, read on the store's own connection: for the tests that hold a
statement to the index it must use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vigil.store.postgres import PostgresStore
from vigil.store.sqlite import SqliteStore


async def sqlite_plan(store: SqliteStore, sql: str, params: Mapping[str, object] | Sequence[object]) -> list[str]:
    """``EXPLAIN QUERY PLAN`` of ``sql``: one detail line per step."""
    rows = await store._db.read(lambda conn: conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall())
    return [str(row["detail"]) for row in rows]


async def postgres_plan(store: PostgresStore, sql: str, params: Mapping[str, object]) -> list[str]:
    """``EXPLAIN`` of ``sql``: its text lines."""
    rows = await store._db.read(lambda conn: conn.execute("EXPLAIN " + sql, dict(params)).fetchall())
    return [str(row["QUERY PLAN"]) for row in rows]
