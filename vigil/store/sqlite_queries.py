"""The SQL of the SQLite store, named after the store methods that run it.

The shared behaviours (``vigil.store.tasks`` …) run these by name through
``Tx.q``; ``postgres_queries`` has the same names with the same named parameters
(``:now`` is the clock's epoch ms); nothing here reads the SQL clock.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from vigil.models import MAX_PRIORITY, MIN_PRIORITY, TaskStatus
from vigil.store import sqlite_retention

# The statements both backends run as written: this module is its backend's
# ``Queries``, so it names them too (exports: F401 and mypy's re-export rule are off here).
from vigil.store.portable import (
    SQL_ACTIVE_TASKS,
    SQL_ADD_COSTS,
    SQL_ADD_DEP,
    SQL_ADD_EVENT,
    SQL_ADD_NOTE,
    SQL_ANSWER,
    SQL_APPROVE,
    SQL_APPROVE_REVIEW,
    SQL_ASK,
    SQL_ATTENTION,
    SQL_CANCEL,
    SQL_CLAIM_RUN_OPEN,
    SQL_CLOSE_RUN,
    SQL_CLOSE_TASK,
    SQL_COUNT_CHILDREN,
    SQL_COUNT_SOURCE_SINCE,
    SQL_DEFER,
    SQL_DEFER_BY,
    SQL_DEPENDENCIES,
    SQL_DROP_OPEN_RUN,
    SQL_FOLLOW_UP_DEPTH,
    SQL_GET_RUN,
    SQL_GET_TASK,
    SQL_HOLDER_OF_KEY,
    SQL_LIST_EVENTS,
    SQL_LIST_NOTES,
    SQL_LIST_RUNS,
    SQL_LOOP_VALUES,
    SQL_ORIGIN_OF,
    SQL_QUEUE,
    SQL_RECORD_RUN,
    SQL_REJECT,
    SQL_REJECT_REVIEW,
    SQL_RELEASE_CLOSED,
    SQL_RENEW_LEASE,
    SQL_REOPEN_AGENT_CLOSED,
    SQL_REQUEST_RETRY,
    SQL_RETRY,
    SQL_SEND_BACK,
    SQL_SENSOR_STATE,
    SQL_SET_GITHUB,
    SQL_SET_LOOP_VALUE,
    SQL_SET_PRIORITY,
    SQL_SET_RUN_EXECUTOR,
    SQL_SET_RUN_PROCESS,
    SQL_SET_SENSOR_ENABLED,
    SQL_SET_TASK_EXECUTOR,
    SQL_SET_WORKTREE,
    SQL_SPEND_SINCE,
    SQL_UNBLOCK,
    add_task_sql,
    sensor_run_sql,
    sensor_skips_sql,
    settle_sql,
)
from vigil.store.rows import Row
from vigil.store.sql.window import WindowDialect

# The roll-ups live in sqlite_costs; re-exported here, where Queries looks for them.
from vigil.store.sqlite_costs import SQL_COST_ROLLUP

if TYPE_CHECKING:
    from vigil.store.transaction import PruneQueries, Tx

_PRIORITIES = range(MIN_PRIORITY, MAX_PRIORITY + 1)

prune: PruneQueries = sqlite_retention  # the SQL of Store.prune

# The new row's values (``portable.add_task_sql``). A follow-up without a workdir or
# code options of its own works where its parent does, as its parent does.
_ADD_TASK_VALUES = """:subject, :description, :skills, :priority, :source, :source_key, :dedup, :parent_id,
       :scheduled_for, :now, :now, :actor, :max_retries,
       CASE WHEN :approval THEN 'blocked' ELSE 'pending' END, CASE WHEN :approval THEN 'pending' END,
       :model, coalesce(:workdir, (SELECT p.workdir FROM tasks AS p WHERE p.id = :parent_id)), :max_cost_usd,
       coalesce(:code, (SELECT p.code FROM tasks AS p WHERE p.id = :parent_id)), :github"""
SQL_ADD_TASK, SQL_ADD_TASK_EVER = add_task_sql(_ADD_TASK_VALUES)


def _next_due_id(max_priority: str = ":max_priority") -> str:
    """The most urgent due task's id. ``priority IN (1, …, 9)`` makes the planner
    seek ix_tasks_claim once per priority, in order, each seek bounded by
    ``scheduled_for <= :now``: neither finished tasks nor many not-yet-due urgent
    tasks are walked, nothing is sorted, and LIMIT 1 ends the walk at the first due
    task. Only priorities up to ``max_priority`` (a parameter, or a number) take
    part (the budget's urgency gate); its unary ``+`` keeps that bound a filter, not the index range the
    planner would otherwise pick instead of the seeks. A pending task still claimed
    is one whose run asked for a retry and has not been recorded yet: no second run
    of it starts until that one has ended."""
    priorities = ", ".join(str(p) for p in _PRIORITIES)
    return f"""SELECT id FROM tasks
        WHERE status = 'pending' AND waiting_on = 0 AND priority IN ({priorities}) AND scheduled_for <= :now
          AND claimed_by IS NULL AND +priority <= {max_priority}
        ORDER BY priority, scheduled_for, id LIMIT 1"""


def _claim() -> str:
    return f"""
UPDATE tasks SET status = 'active', claimed_by = :worker, lease_until = :lease_until,
       started_at = :now, updated_at = :now, updated_by = 'dispatcher',
       attempt_count = attempt_count + 1, cancel_requested = 0,
       executor = coalesce(:executor, executor)
WHERE id = ({_next_due_id()})
RETURNING *
"""


SQL_CLAIM = _claim()
# The task the dispatcher takes next (the queue's marker): the claim's own search.
SQL_NEXT_DUE_ID = _next_due_id(str(MAX_PRIORITY))

# SQLite's writers are serialised by BEGIN IMMEDIATE: no row lock to take.
SQL_GET_RUN_FOR_UPDATE = "SELECT * FROM runs WHERE id = :id"
SQL_TASK_FOR_UPDATE = "SELECT * FROM tasks WHERE id = :id"

SQL_OPEN_RUN = """
INSERT INTO runs (task_id, attempt, started_at, executor, claimed_by)
VALUES (:task_id, (SELECT count(*) + 1 FROM runs WHERE task_id = :task_id), :now, :executor, :worker)
RETURNING id, attempt
"""

# The pending tasks waiting on nothing, through ix_tasks_claim (its partial rows only).
# The earliest any claimable task is due: one bounded seek of ix_tasks_claim per
# priority (a plain min() would walk every pending task through ix_tasks_status_id).
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
SQL_SETTLE = settle_sql("claimed_by IS :worker")


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
# BEGIN IMMEDIATE already serialises the read and the write of the skips.
SQL_SENSOR_SKIPS = "SELECT skips, last_run_at FROM sensor_state WHERE name = :name"
SQL_SET_SENSOR_SKIPS = sensor_skips_sql(":skips")
SQL_LOOP_VALUE = "SELECT value FROM loop_state WHERE key = :key"


def claim(tx: Tx, params: dict[str, Any]) -> tuple[Row, Row] | None:
    """Claim the most urgent due task (``SQL_CLAIM``) and open its run: two
    statements in the caller's ``BEGIN IMMEDIATE`` transaction. Returns the task's
    row and the run's (id, attempt)."""
    row = tx.one(SQL_CLAIM, params)
    if row is None:
        return None
    run = tx.one(SQL_OPEN_RUN, {**params, "task_id": row["id"]})
    assert run is not None
    return row, run


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
