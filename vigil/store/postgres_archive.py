"""What pruned tasks leave behind, kept bounded on the PostgreSQL store: the SQL of
the three archive steps that end a prune (``postgres_retention``), as
``sqlite_archive`` describes them: fold old hour rows into day rows, drop archive
rows older than ``[retention] keep_costs``, drop keys retired before ``keep_keys``.

The fold is one statement: it deletes a batch of hour rows and adds what the delete
returned to the day rows. Two prunes at once cannot fold a row twice: the second
delete waits for the first and finds the row gone, so it adds nothing for it. The
fold line and the dry run's parameters are plain arithmetic, shared with SQLite.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from vigil.store.postgres_db import Conn
from vigil.store.pruning import fold_line

_KEY = "start_ms, span_ms, skills, source, model, sensor"

SQL_FOLD_HOURS = f"""
WITH moved AS (
    DELETE FROM cost_archive WHERE ({_KEY}) IN (
        SELECT {_KEY} FROM cost_archive WHERE span_ms = 3600000 AND start_ms < %(before)s
        ORDER BY start_ms, skills, source, model, sensor LIMIT %(limit)s)
    RETURNING *
)
INSERT INTO cost_archive AS a ({_KEY}, runs, tasks_last, tasks_hour, tasks_day, tasks_model, cost_usd,
                               api_cost_usd, tokens_in, tokens_out, cache_read_tokens, cache_write_tokens)
SELECT (start_ms / 86400000) * 86400000 AS day_ms, 86400000, skills, source, model, sensor, sum(runs),
       sum(tasks_last), sum(tasks_day), sum(tasks_day), sum(tasks_model), sum(cost_usd), sum(api_cost_usd),
       sum(tokens_in), sum(tokens_out), sum(cache_read_tokens), sum(cache_write_tokens)
FROM moved
GROUP BY day_ms, skills, source, model, sensor
ON CONFLICT ({_KEY}) DO UPDATE SET
    runs = a.runs + excluded.runs, tasks_last = a.tasks_last + excluded.tasks_last,
    tasks_hour = a.tasks_hour + excluded.tasks_hour, tasks_day = a.tasks_day + excluded.tasks_day,
    tasks_model = a.tasks_model + excluded.tasks_model, cost_usd = a.cost_usd + excluded.cost_usd,
    api_cost_usd = a.api_cost_usd + excluded.api_cost_usd, tokens_in = a.tokens_in + excluded.tokens_in,
    tokens_out = a.tokens_out + excluded.tokens_out,
    cache_read_tokens = a.cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = a.cache_write_tokens + excluded.cache_write_tokens
RETURNING (SELECT count(*) FROM moved) AS taken
"""

# Rows that ended at or before %(before)s (no row starts less than an hour before its end).
SQL_DROP_COSTS = f"""
DELETE FROM cost_archive WHERE ({_KEY}) IN (
    SELECT {_KEY} FROM cost_archive
    WHERE start_ms <= %(before)s - 3600000 AND start_ms + span_ms <= %(before)s
    ORDER BY start_ms LIMIT %(limit)s)
"""
SQL_DROP_KEYS = """
DELETE FROM retired_keys WHERE source_key IN (
    SELECT source_key FROM retired_keys WHERE retired_at < %(before)s ORDER BY retired_at LIMIT %(limit)s)
"""

SQL_ARCHIVE_PREVIEW = """
SELECT (SELECT count(*) FROM cost_archive WHERE span_ms = 3600000 AND start_ms < %(fold_before)s) AS folded,
       (SELECT count(*) FROM cost_archive
        WHERE start_ms <= %(costs_before)s - 3600000 AND start_ms + span_ms <= %(costs_before)s) AS costs,
       (SELECT count(*) FROM retired_keys WHERE retired_at < %(keys_before)s) AS keys
"""


@dataclass(frozen=True)
class ArchiveStep:
    """One step; a batch returns how many rows it took."""

    name: str  # the PruneResult field it counts into
    sql: str
    before: int

    def batch(self, limit: int) -> Callable[[Conn], Awaitable[int]]:
        async def body(conn: Conn) -> int:
            cur = await conn.execute(self.sql, {"before": self.before, "limit": limit})
            if self.sql is SQL_FOLD_HOURS:
                # one row per day row written, each carrying the count moved (none: nothing moved)
                row = await cur.fetchone()
                return 0 if row is None else int(row["taken"])
            return cur.rowcount

        return body


def archive_steps(
    fold_before_ms: int | None, costs_before_ms: int | None, keys_before_ms: int | None
) -> list[ArchiveStep]:
    """The steps a prune asked for, in the order they run (old costs go before the
    fold, so rows about to be dropped are not folded first)."""
    steps = []
    if costs_before_ms is not None:
        steps.append(ArchiveStep("costs", SQL_DROP_COSTS, costs_before_ms))
    if fold_before_ms is not None:
        steps.append(ArchiveStep("folded", SQL_FOLD_HOURS, fold_line(fold_before_ms)))
    if keys_before_ms is not None:
        steps.append(ArchiveStep("keys", SQL_DROP_KEYS, keys_before_ms))
    return steps
