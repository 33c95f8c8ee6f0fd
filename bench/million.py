"""Build a large Vigil database fast: the real schema, then raw bulk inserts.

The schema comes from opening the file once with ``SqliteStore`` (so migrations,
indexes and triggers are the real ones); the rows are then written with
``executemany`` in one transaction. The insert trigger keeps ``status_counts`` and
writes one ``created`` event per task, exactly as ``add_task`` would.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from vigil.store.sqlite import SqliteStore

FINISHED_STATUSES = ("completed", "completed", "completed", "failed", "canceled")
DAY_MS = 86_400_000


async def _migrate(path: Path) -> None:
    store = await SqliteStore.open(path)
    await store.close()


def build(path: Path, *, total: int, open_tasks: int, now_ms: int) -> None:
    """Create ``path`` with ``total`` tasks: the newest ``open_tasks`` pending, the
    rest finished (with one finished run each, spread over the last 30 days)."""
    asyncio.run(_migrate(path))
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")  # a throwaway build; durability is irrelevant
        conn.execute("BEGIN")
        finished = total - open_tasks
        span = 30 * DAY_MS

        def task_rows() -> Iterator[tuple[str, str, int, int, int, int | None, int]]:
            for i in range(total):
                created = now_ms - span + (span * i) // max(total, 1)
                if i < finished:
                    status = FINISHED_STATUSES[i % len(FINISHED_STATUSES)]
                    yield (f"finished task {i}", status, 1 + i % 9, created, created, created + 60_000, 1)
                else:
                    yield (f"open task {i}", "pending", 1 + i % 9, created, created, None, 0)

        conn.executemany(
            """INSERT INTO tasks (subject, status, priority, scheduled_for, created_at, updated_at,
                                  updated_by, completed_at, attempt_count, source, skills)
               VALUES (?1, ?2, ?3, ?4, ?5, ?5, 'human', ?6, ?7, 'sensor:bulk', '["web"]')""",
            task_rows(),
        )
        conn.execute(
            """INSERT INTO runs (task_id, attempt, started_at, finished_at, outcome, cost_usd,
                                 tokens_in, tokens_out, model)
               SELECT id, 1, completed_at - 60000, completed_at, 'success', 0.01, 1000, 200, 'model-a'
               FROM tasks WHERE completed_at IS NOT NULL"""
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
