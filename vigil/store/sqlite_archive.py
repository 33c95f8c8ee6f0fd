"""What pruned tasks leave behind, kept bounded on the SQLite store: the SQL of the
three archive steps that end a prune (``sqlite_retention``).

* **Fold.** Hour rows of ``cost_archive`` from UTC days that ended before the fold
  line become one row per UTC day and group (skills, source, model, sensor). Every
  sum adds up; a day row's ``tasks_hour`` is its ``tasks_day`` (a task counts once in
  the one key a folded day has).
* **Drop old costs.** Archive rows that ended at or before ``[retention]
  keep_costs`` are deleted.
* **Drop old keys.** Retired keys retired before ``[retention] keep_keys`` are
  deleted; an ``ever`` add may then use such a key again.

Each step works in batches of at most ``batch_size`` rows, one ``BEGIN IMMEDIATE``
transaction each (the writer lock serialises two prunes, so a batch's rows are
folded once); a batch that finds fewer rows than that ends the step.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from vigil.store.pruning import fold_line

_KEY = "start_ms, span_ms, skills, source, model, sensor"

# The oldest hour rows before the fold line, in primary-key order (the same rows for
# both statements of a batch: nothing else writes between them).
_PICK_HOURS = """
SELECT * FROM cost_archive WHERE span_ms = 3600000 AND start_ms < :before
ORDER BY start_ms, skills, source, model, sensor LIMIT :limit
"""

SQL_FOLD_HOURS = f"""
WITH picked AS ({_PICK_HOURS})
INSERT INTO cost_archive ({_KEY}, runs, tasks_last, tasks_hour, tasks_day, tasks_model, cost_usd,
                          api_cost_usd, tokens_in, tokens_out, cache_read_tokens, cache_write_tokens)
SELECT (start_ms / 86400000) * 86400000 AS day_ms, 86400000, skills, source, model, sensor, sum(runs),
       sum(tasks_last), sum(tasks_day), sum(tasks_day), sum(tasks_model), total(cost_usd), total(api_cost_usd),
       sum(tokens_in), sum(tokens_out), sum(cache_read_tokens), sum(cache_write_tokens)
FROM picked WHERE true
GROUP BY day_ms, skills, source, model, sensor
ON CONFLICT ({_KEY}) DO UPDATE SET
    runs = runs + excluded.runs, tasks_last = tasks_last + excluded.tasks_last,
    tasks_hour = tasks_hour + excluded.tasks_hour, tasks_day = tasks_day + excluded.tasks_day,
    tasks_model = tasks_model + excluded.tasks_model, cost_usd = cost_usd + excluded.cost_usd,
    api_cost_usd = api_cost_usd + excluded.api_cost_usd, tokens_in = tokens_in + excluded.tokens_in,
    tokens_out = tokens_out + excluded.tokens_out,
    cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens
"""
SQL_DELETE_FOLDED = f"DELETE FROM cost_archive WHERE ({_KEY}) IN (SELECT {_KEY} FROM ({_PICK_HOURS}))"

# Rows that ended at or before :before (no row starts less than an hour before its end).
SQL_DROP_COSTS = f"""
DELETE FROM cost_archive WHERE ({_KEY}) IN (
    SELECT {_KEY} FROM cost_archive WHERE start_ms <= :before - 3600000 AND start_ms + span_ms <= :before
    ORDER BY start_ms LIMIT :limit)
"""
SQL_DROP_KEYS = """
DELETE FROM retired_keys WHERE source_key IN (
    SELECT source_key FROM retired_keys WHERE retired_at < :before ORDER BY retired_at LIMIT :limit)
"""

# Dry run: the rows each step would take as the archive is now.
SQL_ARCHIVE_PREVIEW = """
SELECT (SELECT count(*) FROM cost_archive WHERE span_ms = 3600000 AND start_ms < :fold_before) AS folded,
       (SELECT count(*) FROM cost_archive
        WHERE start_ms <= :costs_before - 3600000 AND start_ms + span_ms <= :costs_before) AS costs,
       (SELECT count(*) FROM retired_keys WHERE retired_at < :keys_before) AS keys
"""


@dataclass(frozen=True)
class ArchiveStep:
    """One step: its statements run in order in each batch; the last one's row
    count is what the batch took."""

    name: str  # the PruneResult field it counts into
    statements: tuple[str, ...]
    before: int

    def batch(self, limit: int) -> Callable[[sqlite3.Connection], int]:
        def body(conn: sqlite3.Connection) -> int:
            taken = 0
            for sql in self.statements:
                taken = conn.execute(sql, {"before": self.before, "limit": limit}).rowcount
            return taken

        return body


def archive_steps(
    fold_before_ms: int | None, costs_before_ms: int | None, keys_before_ms: int | None
) -> list[ArchiveStep]:
    """The steps a prune asked for, in the order they run (old costs go before the
    fold, so rows about to be dropped are not folded first)."""
    steps = []
    if costs_before_ms is not None:
        steps.append(ArchiveStep("costs", (SQL_DROP_COSTS,), costs_before_ms))
    if fold_before_ms is not None:
        steps.append(ArchiveStep("folded", (SQL_FOLD_HOURS, SQL_DELETE_FOLDED), fold_line(fold_before_ms)))
    if keys_before_ms is not None:
        steps.append(ArchiveStep("keys", (SQL_DROP_KEYS,), keys_before_ms))
    return steps
