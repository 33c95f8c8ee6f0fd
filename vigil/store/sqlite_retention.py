"""The SQL of ``Store.prune`` on SQLite (``pruning`` runs it, as ``tx.q.prune``).

Each batch is one ``BEGIN IMMEDIATE`` transaction. ``:ids`` is a JSON array
(``Tx.array``). After the tasks, what pruned tasks leave behind is kept bounded:

* **Fold.** Hour rows of ``cost_archive`` from UTC days that ended before the fold
  line become one row per UTC day and group (skills, source, model, sensor,
  account). Every sum adds up; a day row's ``tasks_hour`` is its ``tasks_day`` (a
  task counts once in the one key a folded day has).
* **Drop old costs.** Archive rows that ended at or before ``[retention]
  keep_costs`` are deleted.
* **Drop old keys.** Retired keys retired before ``[retention] keep_keys`` are
  deleted; an ``ever`` add may then use such a key again.

Each step works in batches of at most ``batch_size`` rows, one ``BEGIN IMMEDIATE``
transaction each (the writer lock serialises two prunes, so a batch's rows are
folded once); a batch that finds fewer rows than that ends the step.
"""

from __future__ import annotations

from vigil.store.portable import (
    ARCHIVE_ADD,
    ARCHIVE_COLUMNS,
    ARCHIVE_FLAGGED,
    ARCHIVE_KEY,
    origin_chain,
)

# Run as written on both backends; re-exported here, where PruneQueries looks for them.
from vigil.store.portable import SQL_ARCHIVE_PREVIEW as SQL_ARCHIVE_PREVIEW  # noqa: PLC0414
from vigil.store.portable import SQL_DROP_COSTS as SQL_DROP_COSTS  # noqa: PLC0414
from vigil.store.portable import SQL_DROP_KEYS as SQL_DROP_KEYS  # noqa: PLC0414
from vigil.store.portable import SQL_EVENTS_WALK as SQL_EVENTS_WALK  # noqa: PLC0414
from vigil.store.portable import SQL_PRUNE_WALK as SQL_PRUNE_WALK  # noqa: PLC0414

_FINISHED = "('completed', 'failed', 'canceled')"

# Of the tasks in :ids (a JSON array), those that may go now: finished, last updated
# before :cutoff, not held by a dispatcher (an agent may close its task while its run
# is still being recorded: ix_runs_open), no child left (ix_tasks_parent) and
# nothing left depending on them (ix_task_deps_depends_on).
SQL_PRUNABLE = f"""
SELECT t.id FROM tasks t
WHERE t.id IN (SELECT value FROM json_each(:ids))
  AND t.status IN {_FINISHED} AND t.updated_at < :cutoff AND t.claimed_by IS NULL
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id AND r.finished_at IS NULL)
  AND NOT EXISTS (SELECT 1 FROM tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM task_deps d WHERE d.depends_on = t.id)
ORDER BY t.id
"""

# The archive rows of the doomed tasks' finished runs, flagged as ARCHIVE_FLAGGED
# says (sqlite_schema V2). The sensor origin is the root of the task's parent chain,
# read while it still exists.
SQL_ARCHIVE_RUNS = f"""
WITH RECURSIVE doomed(id) AS (SELECT value FROM json_each(:ids)),
{origin_chain("SELECT t.id, t.parent_id, t.source FROM tasks t WHERE t.id IN doomed")},
flagged AS (
    {ARCHIVE_FLAGGED}
    WHERE r.task_id IN doomed AND r.finished_at IS NOT NULL
)
INSERT INTO cost_archive AS a ({ARCHIVE_COLUMNS})
SELECT hour_ms, 3600000, skills, source, model_key, sensor, account_key, count(*), sum(last_any),
       sum(last_hour), sum(last_day), sum(last_model), sum(last_account), total(cost_usd),
       total(api_cost_usd), sum(tokens_in), sum(tokens_out), sum(cache_read_tokens), sum(cache_write_tokens)
FROM flagged WHERE true
GROUP BY hour_ms, skills, source, model_key, sensor, account_key
ON CONFLICT ({ARCHIVE_KEY}) DO UPDATE SET {ARCHIVE_ADD}"""

_IDS = "(SELECT value FROM json_each(:ids))"

# What the doomed tasks take with them, counted before the delete cascades; their
# transcripts; the parents and dependencies they free (each may be free to go once
# they are). JSON arrays.
SQL_PRUNE_COUNTS = f"""
SELECT (SELECT count(*) FROM runs WHERE task_id IN {_IDS}) AS runs,
       (SELECT count(*) FROM task_events WHERE task_id IN {_IDS}) AS events,
       (SELECT count(*) FROM notes WHERE task_id IN {_IDS}) AS notes,
       (SELECT count(*) FROM task_deps WHERE task_id IN {_IDS} OR depends_on IN {_IDS}) AS dependencies,
       (SELECT json_group_array(transcript_path) FROM (
           SELECT transcript_path FROM runs WHERE task_id IN {_IDS} AND transcript_path IS NOT NULL ORDER BY id
       )) AS transcripts,
       (SELECT json_group_array(id) FROM (
           SELECT parent_id AS id FROM tasks WHERE id IN {_IDS} AND parent_id IS NOT NULL
           UNION SELECT depends_on FROM task_deps WHERE task_id IN {_IDS}
       )) AS freed
"""
# A key retired again (an ``open`` key many tasks used) keeps its latest retirement.
SQL_RETIRE_KEYS = f"""
INSERT INTO retired_keys (source_key, retired_at)
SELECT source_key, :now FROM tasks WHERE id IN {_IDS} AND source_key IS NOT NULL
ON CONFLICT (source_key) DO UPDATE SET retired_at = max(retired_at, excluded.retired_at)
"""
SQL_PRUNE_TASKS = f"DELETE FROM tasks WHERE id IN {_IDS}"

SQL_DELETE_EVENTS = f"DELETE FROM task_events WHERE id IN {_IDS}"

# Dry run: everything a full prune would delete, in one read. A task stays if it
# is not prunable itself, or is the parent or a dependency of a task that stays
# (a fixpoint the recursive CTE reaches by walking up from every task that stays).
SQL_PRUNE_PREVIEW = f"""
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
"""

# The oldest hour rows before the fold line, in primary-key order (the same rows for
# both statements of a batch: nothing else writes between them).
_PICK_HOURS = """
SELECT * FROM cost_archive WHERE span_ms = 3600000 AND start_ms < :before
ORDER BY start_ms, skills, source, model, sensor, account LIMIT :limit
"""

SQL_FOLD_HOURS = f"""
WITH picked AS ({_PICK_HOURS})
INSERT INTO cost_archive AS a ({ARCHIVE_COLUMNS})
SELECT (start_ms / 86400000) * 86400000 AS day_ms, 86400000, skills, source, model, sensor, account, sum(runs),
       sum(tasks_last), sum(tasks_day), sum(tasks_day), sum(tasks_model), sum(tasks_account), total(cost_usd),
       total(api_cost_usd), sum(tokens_in), sum(tokens_out), sum(cache_read_tokens), sum(cache_write_tokens)
FROM picked WHERE true
GROUP BY day_ms, skills, source, model, sensor, account
ON CONFLICT ({ARCHIVE_KEY}) DO UPDATE SET {ARCHIVE_ADD}"""
SQL_DELETE_FOLDED = f"DELETE FROM cost_archive WHERE ({ARCHIVE_KEY}) IN (SELECT {ARCHIVE_KEY} FROM ({_PICK_HOURS}))"

FOLD_HOURS: tuple[str, ...] = (SQL_FOLD_HOURS, SQL_DELETE_FOLDED)
