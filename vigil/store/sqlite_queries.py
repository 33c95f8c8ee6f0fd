"""The SQL of the SQLite store, named after the store methods that run it.

The shared behaviours (``vigil.store.tasks`` …) run these by name through
``Tx.q``; ``postgres_queries`` has the same names with the same named parameters
(``:now`` is the clock's epoch ms); nothing here reads the SQL clock.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from vigil.models import MAX_PRIORITY, MIN_PRIORITY, Claim, TaskStatus
from vigil.store import sqlite_retention
from vigil.store.portable import *  # noqa: F403 -- the statements both backends share
from vigil.store.portable import SQL_LIST_NOTES, SQL_SET_LOOP_VALUE, add_task_sql, recover_sql, sensor_run_sql
from vigil.store.rows import row_to_note

# The roll-ups live in sqlite_costs; re-exported here, where Queries looks for them.
from vigil.store.sqlite_costs import SQL_COST_ROLLUP as SQL_COST_ROLLUP  # noqa: PLC0414
from vigil.store.window_sql import WindowDialect

if TYPE_CHECKING:
    from vigil.store.transaction import PruneQueries, Tx

_PRIORITIES = range(MIN_PRIORITY, MAX_PRIORITY + 1)

prune: PruneQueries = sqlite_retention  # the SQL of Store.prune

# The new row's values (``portable.add_task_sql``). A follow-up without a workdir of
# its own works where its parent does.
_ADD_TASK_VALUES = """:subject, :description, :skills, :priority, :source, :source_key, :dedup, :parent_id,
       :scheduled_for, :now, :now, :actor, :max_retries,
       CASE WHEN :approval THEN 'blocked' ELSE 'pending' END, CASE WHEN :approval THEN 'pending' END,
       :model, coalesce(:workdir, (SELECT p.workdir FROM tasks AS p WHERE p.id = :parent_id))"""
SQL_ADD_TASK, SQL_ADD_TASK_EVER = add_task_sql(_ADD_TASK_VALUES)


def _next_due_id(most_urgent_last: int) -> str:
    """The most urgent due task's id. ``priority IN (…)`` makes the planner seek
    ix_tasks_claim once per priority, in order, each seek bounded by
    ``scheduled_for <= :now``: neither finished tasks nor many not-yet-due urgent
    tasks are walked, nothing is sorted, and LIMIT 1 ends the walk at the first due
    task. Only priorities up to ``most_urgent_last`` take part (the budget's urgency
    gate). A pending task still claimed is one whose run asked for a retry and has
    not been recorded yet: no second run of it starts until that one has ended."""
    priorities = ", ".join(str(p) for p in _PRIORITIES if p <= most_urgent_last)
    return f"""SELECT id FROM tasks
        WHERE status = 'pending' AND waiting_on = 0 AND priority IN ({priorities}) AND scheduled_for <= :now
          AND claimed_by IS NULL
        ORDER BY priority, scheduled_for, id LIMIT 1"""


def _claim(most_urgent_last: int) -> str:
    return f"""
UPDATE tasks SET status = 'active', claimed_by = :worker, lease_until = :lease_until,
       started_at = :now, updated_at = :now, updated_by = 'dispatcher',
       attempt_count = attempt_count + 1, cancel_requested = 0,
       executor = coalesce(:executor, executor)
WHERE id = ({_next_due_id(most_urgent_last)})
RETURNING *
"""


SQL_CLAIM = _claim(MAX_PRIORITY)
# The task the dispatcher takes next (the queue's marker): the claim's own search.
SQL_NEXT_DUE_ID = _next_due_id(MAX_PRIORITY)
# claim_next(max_priority=p): only tasks at least that urgent (priority ≤ p).
SQL_CLAIM_UP_TO = {p: _claim(p) for p in _PRIORITIES}

# SQLite's writers are serialised by BEGIN IMMEDIATE: no row lock to take.
SQL_GET_RUN_FOR_UPDATE = "SELECT * FROM runs WHERE id = :id"

SQL_OPEN_RUN = """
INSERT INTO runs (task_id, attempt, started_at, executor, claimed_by)
VALUES (:task_id, (SELECT count(*) + 1 FROM runs WHERE task_id = :task_id), :now, :executor, :worker)
RETURNING id, attempt
"""

SQL_NEXT_DUE_AT = (
    "SELECT min(m) AS m FROM ("
    + " UNION ALL ".join(
        "SELECT min(scheduled_for) AS m FROM tasks"
        f" WHERE status = 'pending' AND waiting_on = 0 AND priority = {p} AND claimed_by IS NULL"
        for p in _PRIORITIES
    )
    + ")"
)

# Newest first, keyset-paged. ``{statuses}`` becomes one ``:sN`` mark per status asked
# for: ix_tasks_status_id walks each status down from :before_id, and SQLite stops each
# walk after :limit rows, so a million finished tasks are never sorted.
SQL_LIST_TASKS = "SELECT * FROM tasks WHERE status IN ({statuses}) AND id < :before_id ORDER BY id DESC LIMIT :limit"


def _literals(statuses: Collection[TaskStatus]) -> str:
    """Statuses as SQL literals (each a ``TaskStatus``, so safe)."""
    return ",".join(f"'{TaskStatus(s).value}'" for s in sorted(set(statuses)))


def list_tasks_sql(statuses: Collection[TaskStatus]) -> str:
    """``SQL_LIST_TASKS`` for these statuses."""
    return SQL_LIST_TASKS.format(statuses=_literals(statuses))


def search_tasks_sql(statuses: Collection[TaskStatus]) -> str:
    """``SQL_SEARCH_TASKS`` for these statuses."""
    return SQL_SEARCH_TASKS.format(statuses=_literals(statuses))


# The task window's pieces: LIKE ignores ASCII case; a skill is a value of the JSON array.
WINDOW = WindowDialect(
    contains="{column} LIKE {param} ESCAPE '\\'",
    has_skill="EXISTS (SELECT 1 FROM json_each(skills) WHERE value = {param})",
    folded="{column} COLLATE NOCASE",
    skills_text="skills",
    unindexed="+{column}",  # keeps the planner off ix_tasks_status_id: walk the finish order instead
    finish=lambda sql: sql,
)

# Kept by triggers in the same transaction as every status change: no count(*).
SQL_COUNT_BY_STATUS = "SELECT status, n FROM status_counts"


# ``+id``: ordering by the bare rowid makes SQLite walk every run in id order instead
# of the few rows of the partial index ix_runs_open (a full scan of the history).
SQL_OPEN_RUNS = "SELECT * FROM runs WHERE finished_at IS NULL ORDER BY +id"
SQL_RECOVER = recover_sql("claimed_by IS :worker")


# History search: ``+status`` keeps the planner off ix_tasks_status_id so it walks
# the primary key downwards and stops at LIMIT matches (no sort of every finished row).
SQL_SEARCH_TASKS = """
SELECT * FROM tasks
WHERE +status IN ({statuses}) AND id < :before_id
  AND (subject LIKE :pattern ESCAPE '\\' OR description LIKE :pattern ESCAPE '\\'
       OR source LIKE :pattern ESCAPE '\\' OR coalesce(result_summary, '') LIKE :pattern ESCAPE '\\')
ORDER BY id DESC LIMIT :limit
"""


# --- guardrails: flood limits, spend, approvals ------------------------------------

# BEGIN IMMEDIATE already serialises every writer: nothing to lock for a count.
SQL_LOCK_COUNT: str | None = None
# A refused insert, counted in loop state in the refusing transaction.
SQL_RECORD_REFUSAL = """
INSERT INTO loop_state (key, value)
VALUES (:key, json_object('total', 1, 'last_at', :now, 'last_source', :source, 'last_reason', :reason))
ON CONFLICT (key) DO UPDATE SET
    value = json_set(excluded.value, '$.total', coalesce(json_extract(loop_state.value, '$.total'), 0) + 1)
"""


SQL_SENSOR_STATES = "SELECT * FROM sensor_state ORDER BY name"
SQL_RECORD_SENSOR_RUN = sensor_run_sql(":state")
SQL_LOOP_VALUE = "SELECT value FROM loop_state WHERE key = :key"


def claim(tx: Tx, params: dict[str, Any]) -> Claim | None:
    """Claim the most urgent due task (``SQL_CLAIM_UP_TO``), open its run and read
    its notes: three statements in the caller's ``BEGIN IMMEDIATE`` transaction."""
    from vigil.store.tasks import task_of

    row = tx.one(SQL_CLAIM_UP_TO[params["max_priority"]], params)
    if row is None:
        return None
    task = task_of(tx, row)
    run = tx.one(SQL_OPEN_RUN, {**params, "task_id": task.id})
    assert run is not None
    notes = tuple(row_to_note(r) for r in tx.all(SQL_LIST_NOTES, {"id": task.id}))
    return Claim(task=task, run_id=int(run["id"]), attempt=int(run["attempt"]), notes=notes)


def replace_loop_value(tx: Tx, key: str, expected: object, value: object) -> bool:
    """Write ``value`` only over ``expected``, compared as Python values (JSON text
    may differ in spacing or key order); BEGIN IMMEDIATE makes it atomic."""
    row = tx.one(SQL_LOOP_VALUE, {"key": key})
    if (None if row is None else tx.loads(row["value"])) != expected:
        return False
    tx.run(SQL_SET_LOOP_VALUE, {"key": key, "value": tx.dumps(value)})
    return True


# The event stream (Store.events_after): a walk up the primary key from :after, the
# filters applied on the way; :kinds is a JSON array (NULL: every kind).
SQL_EVENTS_AFTER = """
SELECT * FROM task_events
WHERE id > :after AND (:since IS NULL OR at >= :since) AND (:task IS NULL OR task_id = :task)
  AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
ORDER BY id LIMIT :limit
"""
