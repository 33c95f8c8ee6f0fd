"""The SQL of ``Store.prune`` on PostgreSQL (``pruning`` runs it, as ``tx.q.prune``),
with the meaning of its SQLite twin (``sqlite_retention``). ``%(ids)s`` is an
array (``Tx.array``).

The prunable check locks the tasks it picks (``FOR UPDATE``), so a dispatcher or a
person changing one at the same moment either commits first (and the check sees the
change) or waits for the batch.

The fold is one statement: it deletes a batch of hour rows and adds what the delete
returned to the day rows. Two prunes at once cannot fold a row twice: the second
delete waits for the first and finds the row gone, so it adds nothing for it. The
fold line and the dry run's parameters are plain arithmetic, shared with SQLite.
"""

from __future__ import annotations

from vigil.store.portable import (
    ARCHIVE_ADD,
    ARCHIVE_COLUMNS,
    ARCHIVE_FLAGGED,
    ARCHIVE_KEY,
    dialect,
    origin_chain,
)

# Run as written on both backends; re-exported here, where PruneQueries looks for them.
from vigil.store.portable import SQL_ARCHIVE_PREVIEW as SQL_ARCHIVE_PREVIEW  # noqa: PLC0414
from vigil.store.portable import SQL_DROP_COSTS as SQL_DROP_COSTS  # noqa: PLC0414
from vigil.store.portable import SQL_DROP_KEYS as SQL_DROP_KEYS  # noqa: PLC0414
from vigil.store.portable import SQL_EVENTS_WALK as SQL_EVENTS_WALK  # noqa: PLC0414
from vigil.store.portable import SQL_PRUNE_WALK as SQL_PRUNE_WALK  # noqa: PLC0414

_FINISHED = "('completed', 'failed', 'canceled')"
_IDS = "ANY(%(ids)s::bigint[])"

SQL_PRUNABLE = f"""
SELECT t.id FROM tasks t
WHERE t.id = {_IDS}
  AND t.status IN {_FINISHED} AND t.updated_at < %(cutoff)s AND t.claimed_by IS NULL
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id AND r.finished_at IS NULL)
  AND NOT EXISTS (SELECT 1 FROM tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM task_deps d WHERE d.depends_on = t.id)
ORDER BY t.id
FOR UPDATE OF t
"""

# The archive rows of the doomed tasks' finished runs, flagged as ARCHIVE_FLAGGED
# says (postgres_schema V2). The sensor origin is the root of the task's parent chain,
# read while it still exists. Written with :name parameters, as portable's fragments.
SQL_ARCHIVE_RUNS = dialect(f"""
WITH RECURSIVE {origin_chain("SELECT t.id, t.parent_id, t.source FROM tasks t WHERE t.id = ANY(:ids::bigint[])")},
flagged AS (
    {ARCHIVE_FLAGGED}
    WHERE r.task_id = ANY(:ids::bigint[]) AND r.finished_at IS NOT NULL
)
INSERT INTO cost_archive AS a ({ARCHIVE_COLUMNS})
SELECT hour_ms, 3600000, skills, source, model_key, sensor, account_key, count(*),
       count(*) FILTER (WHERE last_any), count(*) FILTER (WHERE last_hour), count(*) FILTER (WHERE last_day),
       count(*) FILTER (WHERE last_model), count(*) FILTER (WHERE last_account), coalesce(sum(cost_usd), 0),
       coalesce(sum(api_cost_usd), 0), sum(tokens_in), sum(tokens_out), sum(cache_read_tokens),
       sum(cache_write_tokens)
FROM flagged
GROUP BY hour_ms, skills, source, model_key, sensor, account_key
ON CONFLICT ({ARCHIVE_KEY}) DO UPDATE SET {ARCHIVE_ADD}""")

# What the doomed tasks take with them, counted before the delete cascades; the
# parents and dependencies they free; their transcripts.
SQL_PRUNE_COUNTS = f"""
SELECT (SELECT count(*) FROM runs WHERE task_id = {_IDS}) AS runs,
       (SELECT count(*) FROM task_events WHERE task_id = {_IDS}) AS events,
       (SELECT count(*) FROM notes WHERE task_id = {_IDS}) AS notes,
       (SELECT count(*) FROM task_deps WHERE task_id = {_IDS} OR depends_on = {_IDS}) AS dependencies,
       (SELECT coalesce(jsonb_agg(transcript_path ORDER BY id), '[]') FROM runs
        WHERE task_id = {_IDS} AND transcript_path IS NOT NULL) AS transcripts,
       ARRAY(SELECT parent_id FROM tasks WHERE id = {_IDS} AND parent_id IS NOT NULL
             UNION SELECT depends_on FROM task_deps WHERE task_id = {_IDS}) AS freed
"""
# A key retired again (an ``open`` key many tasks used) keeps its latest retirement.
SQL_RETIRE_KEYS = f"""
INSERT INTO retired_keys AS k (source_key, retired_at)
SELECT DISTINCT source_key, %(now)s::bigint FROM tasks WHERE id = {_IDS} AND source_key IS NOT NULL
ON CONFLICT (source_key) DO UPDATE SET retired_at = greatest(k.retired_at, excluded.retired_at)
"""
SQL_PRUNE_TASKS = f"DELETE FROM tasks WHERE id = {_IDS}"

SQL_DELETE_EVENTS = f"DELETE FROM task_events WHERE id = {_IDS}"

# Dry run: everything a full prune would delete, in one read. A task stays if it is
# not prunable itself, or is the parent or a dependency of a task that stays.
SQL_PRUNE_PREVIEW = f"""
WITH RECURSIVE kept(id) AS (
    SELECT id FROM tasks
    WHERE status NOT IN {_FINISHED} OR updated_at >= %(cutoff)s OR claimed_by IS NOT NULL
    UNION
    SELECT task_id FROM runs WHERE finished_at IS NULL
    UNION
    SELECT up.id FROM kept k CROSS JOIN LATERAL (
        SELECT t.parent_id AS id FROM tasks t WHERE t.id = k.id AND t.parent_id IS NOT NULL
        UNION ALL
        SELECT d.depends_on FROM task_deps d WHERE d.task_id = k.id
    ) AS up
),
doomed(id) AS (
    SELECT id FROM tasks WHERE status IN {_FINISHED} AND updated_at < %(cutoff)s
    EXCEPT SELECT id FROM kept
)
SELECT (SELECT count(*) FROM doomed) AS tasks,
       (SELECT count(*) FROM runs WHERE task_id IN (SELECT id FROM doomed)) AS runs,
       (SELECT count(*) FROM task_events WHERE task_id IN (SELECT id FROM doomed)) AS events,
       (SELECT count(*) FROM task_events
        WHERE at < %(events_cutoff)s AND task_id NOT IN (SELECT id FROM doomed)) AS old_events,
       (SELECT count(*) FROM notes WHERE task_id IN (SELECT id FROM doomed)) AS notes,
       (SELECT count(*) FROM task_deps
        WHERE task_id IN (SELECT id FROM doomed) OR depends_on IN (SELECT id FROM doomed)) AS dependencies,
       (SELECT coalesce(jsonb_agg(transcript_path ORDER BY id), '[]') FROM runs
        WHERE task_id IN (SELECT id FROM doomed) AND transcript_path IS NOT NULL) AS transcripts
"""

# One row per hour row moved (its row count is what the batch took).
SQL_FOLD_HOURS = f"""
WITH moved AS (
    DELETE FROM cost_archive WHERE ({ARCHIVE_KEY}) IN (
        SELECT {ARCHIVE_KEY} FROM cost_archive WHERE span_ms = 3600000 AND start_ms < %(before)s
        ORDER BY start_ms, skills, source, model, sensor, account LIMIT %(limit)s)
    RETURNING *
), folded AS (
INSERT INTO cost_archive AS a ({ARCHIVE_COLUMNS})
SELECT (start_ms / 86400000) * 86400000 AS day_ms, 86400000, skills, source, model, sensor, account, sum(runs),
       sum(tasks_last), sum(tasks_day), sum(tasks_day), sum(tasks_model), sum(tasks_account), sum(cost_usd),
       sum(api_cost_usd), sum(tokens_in), sum(tokens_out), sum(cache_read_tokens), sum(cache_write_tokens)
FROM moved
GROUP BY day_ms, skills, source, model, sensor, account
ON CONFLICT ({ARCHIVE_KEY}) DO UPDATE SET {ARCHIVE_ADD})
SELECT 1 FROM moved
"""

FOLD_HOURS: tuple[str, ...] = (SQL_FOLD_HOURS,)
