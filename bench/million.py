"""Build a large Vigil database fast: the real schema, then raw bulk inserts.

The schema comes from opening the file once with ``SqliteStore`` (so migrations,
indexes and triggers are the real ones); the rows are then made by SQL itself, in
one transaction. The insert trigger keeps ``status_counts`` and
writes one ``created`` event per task, exactly as ``add_task`` would.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from vigil.store.sqlite import SqliteStore

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
        # One statement that makes its own rows: binding a million Python tuples
        # would take three quarters of the build. Finished tasks cycle through completed
        # (three in five), failed and canceled.
        conn.execute(
            """WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < :total),
                    row(i, created, finished) AS (SELECT i, :now - :span + (:span * i) / :total, i < :finished FROM n)
               INSERT INTO tasks (subject, status, priority, scheduled_for, created_at, updated_at,
                                  updated_by, completed_at, attempt_count, source, skills)
               SELECT CASE WHEN finished THEN 'finished task ' ELSE 'open task ' END || i,
                      CASE WHEN NOT finished THEN 'pending' WHEN i % 5 = 3 THEN 'failed'
                           WHEN i % 5 = 4 THEN 'canceled' ELSE 'completed' END,
                      1 + i % 9, created, created, created, 'human',
                      CASE WHEN finished THEN created + 60000 END, finished, 'sensor:bulk', '["web"]'
               FROM row WHERE i < :total""",
            {"total": total, "finished": total - open_tasks, "now": now_ms, "span": 30 * DAY_MS},
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
