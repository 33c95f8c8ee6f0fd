"""Flood limits (``[limits]``) on PostgreSQL, checked inside the insert transaction.

The limits and their messages are those of ``sqlite_limits``. SQLite serialises
writers; here several processes insert at once, so before counting a source's
tasks of the last day (or a parent's follow-ups) the transaction takes an advisory
transaction lock on that source (or parent). A second inserter of the same source
waits for the first to commit and then counts its rows: two can never pass a limit
together. A refusal is counted in loop state ``rejected_inserts`` by one atomic
upsert in the same transaction.
"""

from __future__ import annotations

from typing import Any

from vigil.clock import MS_PER_DAY
from vigil.config import LimitsSettings
from vigil.models import REJECTED_INSERTS_KEY, NewTask
from vigil.store.postgres_db import Conn
from vigil.store.postgres_queries import (
    SQL_COUNT_CHILDREN,
    SQL_COUNT_SOURCE_SINCE,
    SQL_FOLLOW_UP_DEPTH,
    SQL_LOCK_COUNT,
)
from vigil.store.postgres_schema import LOCK_KEY
from vigil.store.sqlite_limits import UNLIMITED_SOURCES, Refusal

LOCK_COUNT = LOCK_KEY + 1  # first key of the per-source / per-parent counting locks

SQL_RECORD_REFUSAL = """
INSERT INTO loop_state (key, value)
VALUES (%(key)s, jsonb_build_object('total', 1, 'last_at', %(now)s::bigint,
                                    'last_source', %(source)s::text, 'last_reason', %(reason)s::text))
ON CONFLICT (key) DO UPDATE SET value = excluded.value
    || jsonb_build_object('total', coalesce((loop_state.value ->> 'total')::bigint, 0) + 1)
"""


class PgFloodGate:
    """The limits for one transaction; counts read once are kept and incremented as
    tasks are added (one count query per parent and per source in a batch)."""

    def __init__(self, limits: LimitsSettings, now_ms: int) -> None:
        self._limits = limits
        self._now_ms = now_ms
        self._children: dict[int, int] = {}
        self._per_source: dict[str, int] = {}
        self.refused = 0

    def _source_cap(self, source: str) -> int:
        return self._limits.per_source.get(source, self._limits.max_per_source_per_day)

    @staticmethod
    def may_refuse(limits: LimitsSettings, new: NewTask) -> bool:
        """Whether any of ``limits`` applies to ``new`` at all."""
        if new.parent_id is not None and (limits.max_depth or limits.max_children):
            return True
        cap = limits.per_source.get(new.source, limits.max_per_source_per_day)
        return bool(cap) and new.source not in UNLIMITED_SOURCES

    async def _count(self, conn: Conn, lock_name: str, sql: str, params: dict[str, Any]) -> int:
        await conn.execute(SQL_LOCK_COUNT, {"lock_key": LOCK_COUNT, "name": lock_name})
        row = await (await conn.execute(sql, params)).fetchone()
        assert row is not None
        return int(row["n"])

    async def check(self, conn: Conn, new: NewTask) -> Refusal | None:
        """The limit ``new`` would break, or None when it may be added."""
        limits = self._limits
        if new.parent_id is not None and limits.max_depth:
            params = {"parent_id": new.parent_id, "max_depth": limits.max_depth}
            row = await (await conn.execute(SQL_FOLLOW_UP_DEPTH, params)).fetchone()
            assert row is not None
            if int(row["depth"]) > limits.max_depth:
                return Refusal(
                    f"follow-up of task #{new.parent_id} would be nested deeper than "
                    f"[limits] max_depth = {limits.max_depth}"
                )
        if new.parent_id is not None and limits.max_children:
            if new.parent_id not in self._children:
                params = {"parent_id": new.parent_id, "cap": limits.max_children}
                count = await self._count(conn, f"parent:{new.parent_id}", SQL_COUNT_CHILDREN, params)
                self._children[new.parent_id] = count
            if self._children[new.parent_id] >= limits.max_children:
                return Refusal(
                    f"task #{new.parent_id} already has {limits.max_children} follow-ups "
                    f"([limits] max_children = {limits.max_children})"
                )
        cap = self._source_cap(new.source)
        if cap and new.source not in UNLIMITED_SOURCES:
            if new.source not in self._per_source:
                window = {"source": new.source, "since": self._now_ms - MS_PER_DAY, "cap": cap}
                count = await self._count(conn, f"source:{new.source}", SQL_COUNT_SOURCE_SINCE, window)
                self._per_source[new.source] = count
            if self._per_source[new.source] >= cap:
                return Refusal(f"source {new.source!r} already added {cap} tasks in the last 24 h ([limits] cap {cap})")
        return None

    def added(self, new: NewTask) -> None:
        """Count a task that was inserted in this transaction."""
        if new.parent_id is not None and new.parent_id in self._children:
            self._children[new.parent_id] += 1
        if new.source in self._per_source:
            self._per_source[new.source] += 1

    async def record(self, conn: Conn, new: NewTask, refusal: Refusal) -> None:
        """Count a refusal in loop state, in the caller's transaction."""
        self.refused += 1
        params = {"key": REJECTED_INSERTS_KEY, "now": self._now_ms, "source": new.source, "reason": refusal.reason}
        await conn.execute(SQL_RECORD_REFUSAL, params)
