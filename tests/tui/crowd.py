"""Homes of many tasks, made by SQL through the real schema (as ``bench.million``):
the store is migrated by ``SqliteStore``, then one statement makes the rows, and the
insert trigger keeps the counts and writes each ``created`` event."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from vigil.store.sqlite import SqliteStore

APPROVAL_EVERY = 50  # every 50th task waits for a person's approval
BLOCKED_EVERY = 100  # every 100th (+1) is blocked


async def _migrate(path: Path) -> None:
    await (await SqliteStore.open(path)).close()


async def crowd(path: Path, *, total: int, due_at_ms: int, blocked: bool = True, skill: str | None = "web") -> None:
    """``total`` open tasks ``task 1`` … ``task N``, due at ``due_at_ms`` (minus their
    number in ms, so the older are due first), priorities 1–9 in turn, every third
    with the skill ``skill`` (None: none; a task whose skill the home lacks fails
    when it runs), sources ``sensor:inbox`` and ``human`` in turn; with
    ``blocked``, every ``APPROVAL_EVERY``-th awaits approval and every
    ``BLOCKED_EVERY``-th + 1 is blocked."""
    await _migrate(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(
            """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :total)
               INSERT INTO tasks (subject, status, approval, priority, skills, source, scheduled_for,
                                  created_at, updated_at, updated_by)
               SELECT 'task ' || i,
                      CASE WHEN :blocked AND (i % :approval = 0 OR i % :every = 1) THEN 'blocked' ELSE 'pending' END,
                      CASE WHEN :blocked AND i % :approval = 0 THEN 'pending' END,
                      1 + i % 9,
                      CASE WHEN i % 3 = 0 AND :skill IS NOT NULL THEN json_array(:skill) ELSE '[]' END,
                      CASE WHEN i % 2 = 0 THEN 'sensor:inbox' ELSE 'human' END,
                      :due - :total + i, :due - :total + i, :due - :total + i, 'human'
               FROM n""",
            {
                "total": total,
                "due": due_at_ms,
                "blocked": blocked,
                "approval": APPROVAL_EVERY,
                "every": BLOCKED_EVERY,
                "skill": skill,
            },
        )
    finally:
        conn.close()
