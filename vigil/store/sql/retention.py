"""The SQL of ``Store.prune`` (``pruning`` runs it). ``:ids`` is a JSON array on
SQLite, an array on PostgreSQL (``Tx.array``). After the tasks, what pruned tasks
leave behind is kept bounded:

* **Fold.** Hour rows of ``cost_archive`` from UTC days that ended before the fold
  line become one row per UTC day and group (skills, source, model, sensor,
  account). Every sum adds up; a day row's ``tasks_hour`` is its ``tasks_day`` (a
  task counts once in the one key a folded day has).
* **Drop old costs.** Archive rows that ended at or before ``[retention]
  keep_costs`` are deleted.
* **Drop old keys.** Retired keys retired before ``[retention] keep_keys`` are
  deleted; an ``ever`` add may then use such a key again.

Each step works in batches of at most ``batch_size`` rows, one transaction each; a
batch that finds fewer rows than that ends the step. On SQLite the writer lock
serialises two prunes, so a batch's rows are folded once. On PostgreSQL the
prunable check locks the tasks it picks (``FOR UPDATE``), so a dispatcher or a
person changing one at the same moment either commits first (and the check sees
the change) or waits for the batch; and the fold is one statement that deletes a
batch of hour rows and adds what the delete returned to the day rows, so two prunes
at once cannot fold a row twice (the second delete waits for the first and finds
the row gone).
"""

from __future__ import annotations

from vigil.store.sql.costs import RUN_ACCOUNT, origin_chain
from vigil.store.transaction import Sql

PRUNE_WALK = Sql("SELECT id, created_at FROM tasks WHERE id > :after ORDER BY id LIMIT :limit")

EVENTS_WALK = Sql("SELECT id, at FROM task_events WHERE id > :after ORDER BY id LIMIT :limit")

_FINISHED = "('completed', 'failed', 'canceled')"

# :ids as a set of task ids: SQLite's JSON array, PostgreSQL's array.
_IDS_SQLITE = "(SELECT value FROM json_each(:ids))"
_IDS_POSTGRES = "ANY(:ids::bigint[])"

# Of the tasks in :ids, those that may go now: finished, last updated before
# :cutoff, not held by a dispatcher (an agent may close its task while its run is
# still being recorded: ix_runs_open), no child left (ix_tasks_parent) and nothing
# left depending on them (ix_task_deps_depends_on). Locked on PostgreSQL.
_PRUNABLE = """
SELECT t.id FROM tasks t
WHERE t.id {ids}
  AND t.status IN {finished} AND t.updated_at < :cutoff AND t.claimed_by IS NULL
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id AND r.finished_at IS NULL)
  AND NOT EXISTS (SELECT 1 FROM tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM task_deps d WHERE d.depends_on = t.id)
ORDER BY t.id
"""
PRUNABLE = Sql(
    sqlite=_PRUNABLE.format(ids="IN (SELECT value FROM json_each(:ids))", finished=_FINISHED),
    postgres=_PRUNABLE.format(ids=f"= {_IDS_POSTGRES}", finished=_FINISHED) + "FOR UPDATE OF t\n",
)

# The primary key of ``cost_archive``, and every column of a row.
ARCHIVE_KEY = "start_ms, span_ms, skills, source, model, sensor, account"
ARCHIVE_COLUMNS = f"""{ARCHIVE_KEY}, runs, tasks_last, tasks_hour, tasks_day, tasks_model, tasks_account,
    cost_usd, api_cost_usd, tokens_in, tokens_out, cache_read_tokens, cache_write_tokens"""

# The runs to archive with five flags that mark one run per task and grouping (its
# last run overall, in its hour, in its UTC day, with its model, with its account),
# so that a roll-up counts each task once per group (schema V2; the account's since
# SQLite V7, PostgreSQL V9). ``ARCHIVE_RUNS`` defines ``origin`` (``origin_chain``)
# and adds the WHERE that picks the doomed tasks' finished runs.
_ARCHIVE_FLAGGED = f"""
    SELECT r.*, t.skills, t.source, o.sensor,
           (r.finished_at / 3600000) * 3600000 AS hour_ms,
           coalesce(r.model, '(none)') AS model_key,
           {RUN_ACCOUNT} AS account_key,
           row_number() OVER (PARTITION BY r.task_id ORDER BY r.finished_at DESC, r.id DESC) = 1 AS last_any,
           row_number() OVER (PARTITION BY r.task_id, r.finished_at / 3600000
                              ORDER BY r.finished_at DESC, r.id DESC) = 1 AS last_hour,
           row_number() OVER (PARTITION BY r.task_id, r.finished_at / 86400000
                              ORDER BY r.finished_at DESC, r.id DESC) = 1 AS last_day,
           row_number() OVER (PARTITION BY r.task_id, coalesce(r.model, '(none)')
                              ORDER BY r.finished_at DESC, r.id DESC) = 1 AS last_model,
           row_number() OVER (PARTITION BY r.task_id, {RUN_ACCOUNT}
                              ORDER BY r.finished_at DESC, r.id DESC) = 1 AS last_account
    FROM runs r JOIN tasks t ON t.id = r.task_id JOIN origin o ON o.task_id = r.task_id"""

# An archive row that exists already (``INSERT INTO cost_archive AS a … ON CONFLICT
# (ARCHIVE_KEY) DO UPDATE SET``) takes the new sums on top of its own.
_ARCHIVE_ADD = """
    runs = a.runs + excluded.runs, tasks_last = a.tasks_last + excluded.tasks_last,
    tasks_hour = a.tasks_hour + excluded.tasks_hour, tasks_day = a.tasks_day + excluded.tasks_day,
    tasks_model = a.tasks_model + excluded.tasks_model, tasks_account = a.tasks_account + excluded.tasks_account,
    cost_usd = a.cost_usd + excluded.cost_usd,
    api_cost_usd = a.api_cost_usd + excluded.api_cost_usd, tokens_in = a.tokens_in + excluded.tokens_in,
    tokens_out = a.tokens_out + excluded.tokens_out,
    cache_read_tokens = a.cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = a.cache_write_tokens + excluded.cache_write_tokens
"""

# The archive rows of the doomed tasks' finished runs, flagged as _ARCHIVE_FLAGGED
# says. The sensor origin is the root of the task's parent chain, read while it
# still exists.
ARCHIVE_RUNS = Sql(
    sqlite=f"""
WITH RECURSIVE doomed(id) AS (SELECT value FROM json_each(:ids)),
{origin_chain("SELECT t.id, t.parent_id, t.source FROM tasks t WHERE t.id IN doomed")},
flagged AS (
    {_ARCHIVE_FLAGGED}
    WHERE r.task_id IN doomed AND r.finished_at IS NOT NULL
)
INSERT INTO cost_archive AS a ({ARCHIVE_COLUMNS})
SELECT hour_ms, 3600000, skills, source, model_key, sensor, account_key, count(*), sum(last_any),
       sum(last_hour), sum(last_day), sum(last_model), sum(last_account), total(cost_usd),
       total(api_cost_usd), sum(tokens_in), sum(tokens_out), sum(cache_read_tokens), sum(cache_write_tokens)
FROM flagged WHERE true
GROUP BY hour_ms, skills, source, model_key, sensor, account_key
ON CONFLICT ({ARCHIVE_KEY}) DO UPDATE SET {_ARCHIVE_ADD}""",
    postgres=f"""
WITH RECURSIVE {origin_chain("SELECT t.id, t.parent_id, t.source FROM tasks t WHERE t.id = ANY(:ids::bigint[])")},
flagged AS (
    {_ARCHIVE_FLAGGED}
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
ON CONFLICT ({ARCHIVE_KEY}) DO UPDATE SET {_ARCHIVE_ADD}""",
)

# What the doomed tasks take with them, counted before the delete cascades; their
# transcripts; the parents and dependencies they free (each may be free to go once
# they are): JSON arrays on SQLite, on PostgreSQL a jsonb array and an array.
PRUNE_COUNTS = Sql(
    sqlite=f"""
SELECT (SELECT count(*) FROM runs WHERE task_id IN {_IDS_SQLITE}) AS runs,
       (SELECT count(*) FROM task_events WHERE task_id IN {_IDS_SQLITE}) AS events,
       (SELECT count(*) FROM notes WHERE task_id IN {_IDS_SQLITE}) AS notes,
       (SELECT count(*) FROM task_deps WHERE task_id IN {_IDS_SQLITE} OR depends_on IN {_IDS_SQLITE}) AS dependencies,
       (SELECT json_group_array(transcript_path) FROM (
           SELECT transcript_path FROM runs WHERE task_id IN {_IDS_SQLITE} AND transcript_path IS NOT NULL ORDER BY id
       )) AS transcripts,
       (SELECT json_group_array(id) FROM (
           SELECT parent_id AS id FROM tasks WHERE id IN {_IDS_SQLITE} AND parent_id IS NOT NULL
           UNION SELECT depends_on FROM task_deps WHERE task_id IN {_IDS_SQLITE}
       )) AS freed
""",
    postgres=f"""
SELECT (SELECT count(*) FROM runs WHERE task_id = {_IDS_POSTGRES}) AS runs,
       (SELECT count(*) FROM task_events WHERE task_id = {_IDS_POSTGRES}) AS events,
       (SELECT count(*) FROM notes WHERE task_id = {_IDS_POSTGRES}) AS notes,
       (SELECT count(*) FROM task_deps WHERE task_id = {_IDS_POSTGRES} OR depends_on = {_IDS_POSTGRES}) AS dependencies,
       (SELECT coalesce(jsonb_agg(transcript_path ORDER BY id), '[]') FROM runs
        WHERE task_id = {_IDS_POSTGRES} AND transcript_path IS NOT NULL) AS transcripts,
       ARRAY(SELECT parent_id FROM tasks WHERE id = {_IDS_POSTGRES} AND parent_id IS NOT NULL
             UNION SELECT depends_on FROM task_deps WHERE task_id = {_IDS_POSTGRES}) AS freed
""",
)

# A key retired again (an ``open`` key many tasks used) keeps its latest retirement.
RETIRE_KEYS = Sql(
    sqlite=f"""
INSERT INTO retired_keys (source_key, retired_at)
SELECT source_key, :now FROM tasks WHERE id IN {_IDS_SQLITE} AND source_key IS NOT NULL
ON CONFLICT (source_key) DO UPDATE SET retired_at = max(retired_at, excluded.retired_at)
""",
    postgres=f"""
INSERT INTO retired_keys AS k (source_key, retired_at)
SELECT DISTINCT source_key, :now::bigint FROM tasks WHERE id = {_IDS_POSTGRES} AND source_key IS NOT NULL
ON CONFLICT (source_key) DO UPDATE SET retired_at = greatest(k.retired_at, excluded.retired_at)
""",
)

PRUNE_TASKS = Sql(
    sqlite=f"DELETE FROM tasks WHERE id IN {_IDS_SQLITE}",
    postgres=f"DELETE FROM tasks WHERE id = {_IDS_POSTGRES}",
)

DELETE_EVENTS = Sql(
    sqlite=f"DELETE FROM task_events WHERE id IN {_IDS_SQLITE}",
    postgres=f"DELETE FROM task_events WHERE id = {_IDS_POSTGRES}",
)

# Dry run: everything a full prune would delete, in one read. A task stays if it is
# not prunable itself, or is the parent or a dependency of a task that stays (a
# fixpoint the recursive CTE reaches by walking up from every task that stays).
PRUNE_PREVIEW = Sql(
    sqlite=f"""
WITH RECURSIVE kept(id) AS (
    SELECT id FROM tasks WHERE status NOT IN {_FINISHED} OR updated_at >= :cutoff OR claimed_by IS NOT NULL
    UNION
    SELECT task_id FROM runs WHERE finished_at IS NULL
    UNION
    SELECT t.parent_id FROM kept k JOIN tasks t ON t.id = k.id WHERE t.parent_id IS NOT NULL
    UNION
    SELECT d.depends_on FROM kept k JOIN task_deps d ON d.task_id = k.id
),
doomed(id) AS (
    SELECT id FROM tasks WHERE status IN {_FINISHED} AND updated_at < :cutoff
    EXCEPT SELECT id FROM kept
)
SELECT (SELECT count(*) FROM doomed) AS tasks,
       (SELECT count(*) FROM runs WHERE task_id IN doomed) AS runs,
       (SELECT count(*) FROM task_events WHERE task_id IN doomed) AS events,
       (SELECT count(*) FROM task_events WHERE at < :events_cutoff AND task_id NOT IN doomed) AS old_events,
       (SELECT count(*) FROM notes WHERE task_id IN doomed) AS notes,
       (SELECT count(*) FROM task_deps WHERE task_id IN doomed OR depends_on IN doomed) AS dependencies,
       (SELECT json_group_array(transcript_path) FROM
           (SELECT transcript_path FROM runs WHERE task_id IN doomed AND transcript_path IS NOT NULL
            ORDER BY id)) AS transcripts
""",
    postgres=f"""
WITH RECURSIVE kept(id) AS (
    SELECT id FROM tasks
    WHERE status NOT IN {_FINISHED} OR updated_at >= :cutoff OR claimed_by IS NOT NULL
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
    SELECT id FROM tasks WHERE status IN {_FINISHED} AND updated_at < :cutoff
    EXCEPT SELECT id FROM kept
)
SELECT (SELECT count(*) FROM doomed) AS tasks,
       (SELECT count(*) FROM runs WHERE task_id IN (SELECT id FROM doomed)) AS runs,
       (SELECT count(*) FROM task_events WHERE task_id IN (SELECT id FROM doomed)) AS events,
       (SELECT count(*) FROM task_events
        WHERE at < :events_cutoff AND task_id NOT IN (SELECT id FROM doomed)) AS old_events,
       (SELECT count(*) FROM notes WHERE task_id IN (SELECT id FROM doomed)) AS notes,
       (SELECT count(*) FROM task_deps
        WHERE task_id IN (SELECT id FROM doomed) OR depends_on IN (SELECT id FROM doomed)) AS dependencies,
       (SELECT coalesce(jsonb_agg(transcript_path ORDER BY id), '[]') FROM runs
        WHERE task_id IN (SELECT id FROM doomed) AND transcript_path IS NOT NULL) AS transcripts
""",
)

# The oldest hour rows before the fold line, in primary-key order (SQLite: the same
# rows for both of its statements: nothing else writes between them).
_PICK_HOURS = """
SELECT * FROM cost_archive WHERE span_ms = 3600000 AND start_ms < :before
ORDER BY start_ms, skills, source, model, sensor, account LIMIT :limit
"""

# The fold is two statements on SQLite (add the picked hours to their days, then
# delete them) and one on PostgreSQL (FOLD_HOURS deletes and adds); ``pruning`` runs
# both in order, and FOLD_HOURS's row count is the hour rows moved.
ADD_FOLDED_DAYS = Sql(
    sqlite=f"""
WITH picked AS ({_PICK_HOURS})
INSERT INTO cost_archive AS a ({ARCHIVE_COLUMNS})
SELECT (start_ms / 86400000) * 86400000 AS day_ms, 86400000, skills, source, model, sensor, account, sum(runs),
       sum(tasks_last), sum(tasks_day), sum(tasks_day), sum(tasks_model), sum(tasks_account), total(cost_usd),
       total(api_cost_usd), sum(tokens_in), sum(tokens_out), sum(cache_read_tokens), sum(cache_write_tokens)
FROM picked WHERE true
GROUP BY day_ms, skills, source, model, sensor, account
ON CONFLICT ({ARCHIVE_KEY}) DO UPDATE SET {_ARCHIVE_ADD}""",
    postgres=None,
)
FOLD_HOURS = Sql(
    sqlite=f"DELETE FROM cost_archive WHERE ({ARCHIVE_KEY}) IN (SELECT {ARCHIVE_KEY} FROM ({_PICK_HOURS}))",
    postgres=f"""
WITH moved AS (
    DELETE FROM cost_archive WHERE ({ARCHIVE_KEY}) IN (
        SELECT {ARCHIVE_KEY} FROM cost_archive WHERE span_ms = 3600000 AND start_ms < :before
        ORDER BY start_ms, skills, source, model, sensor, account LIMIT :limit)
    RETURNING *
), folded AS (
INSERT INTO cost_archive AS a ({ARCHIVE_COLUMNS})
SELECT (start_ms / 86400000) * 86400000 AS day_ms, 86400000, skills, source, model, sensor, account, sum(runs),
       sum(tasks_last), sum(tasks_day), sum(tasks_day), sum(tasks_model), sum(tasks_account), sum(cost_usd),
       sum(api_cost_usd), sum(tokens_in), sum(tokens_out), sum(cache_read_tokens), sum(cache_write_tokens)
FROM moved
GROUP BY day_ms, skills, source, model, sensor, account
ON CONFLICT ({ARCHIVE_KEY}) DO UPDATE SET {_ARCHIVE_ADD})
SELECT 1 FROM moved
""",
)

# Rows that ended at or before :before (no row starts less than an hour before its end).
DROP_COSTS = Sql(f"""
DELETE FROM cost_archive WHERE ({ARCHIVE_KEY}) IN (
    SELECT {ARCHIVE_KEY} FROM cost_archive WHERE start_ms <= :before - 3600000 AND start_ms + span_ms <= :before
    ORDER BY start_ms LIMIT :limit)
""")

DROP_KEYS = Sql("""
DELETE FROM retired_keys WHERE source_key IN (
    SELECT source_key FROM retired_keys WHERE retired_at < :before ORDER BY retired_at LIMIT :limit)
""")

# Dry run: the rows each step would take as the archive is now.
ARCHIVE_PREVIEW = Sql("""
SELECT (SELECT count(*) FROM cost_archive WHERE span_ms = 3600000 AND start_ms < :fold_before) AS folded,
       (SELECT count(*) FROM cost_archive
        WHERE start_ms <= :costs_before - 3600000 AND start_ms + span_ms <= :costs_before) AS costs,
       (SELECT count(*) FROM retired_keys WHERE retired_at < :keys_before) AS keys
""")
