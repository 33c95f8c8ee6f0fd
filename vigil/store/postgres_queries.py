"""The SQL of the PostgreSQL store, named after the methods that run it.

Parameters are psycopg's named ``%(name)s`` (so a literal percent sign is ``%%``);
``%(now)s`` is the clock's epoch ms: nothing here reads the server's clock. The
meaning of each statement is that of its SQLite twin in ``sqlite_queries``.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from vigil.models import TaskStatus
from vigil.store import postgres_retention

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
    dialect,
    sensor_run_sql,
    sensor_skips_sql,
    settle_sql,
)
from vigil.store.postgres.schema import LOCK_KEY

# The roll-ups live in postgres_costs; re-exported here, where Queries looks for them.
from vigil.store.postgres_costs import SQL_COST_ROLLUP
from vigil.store.rows import Row
from vigil.store.sql.window import WindowDialect

if TYPE_CHECKING:
    from vigil.store.transaction import PruneQueries, Tx

prune: PruneQueries = postgres_retention  # the SQL of Store.prune

_OPEN = "('pending', 'active', 'blocked', 'waiting')"

# The new row's values (``portable.add_task_sql``), cast: in INSERT … SELECT an
# untyped parameter would otherwise be taken as text. A follow-up without a workdir
# or code options of its own works where its parent does, as its parent does.
_ADD_TASK_VALUES = """:subject::text, :description::text, :skills::jsonb, :priority::int,
       :source::text, :source_key::text, :dedup::text, :parent_id::bigint,
       :scheduled_for::bigint, :now::bigint, :now::bigint, :actor::text, :max_retries::int,
       CASE WHEN :approval::bool THEN 'blocked' ELSE 'pending' END,
       CASE WHEN :approval::bool THEN 'pending' END, :model::text,
       coalesce(:workdir::text, (SELECT p.workdir FROM tasks AS p WHERE p.id = :parent_id::bigint)),
       :max_cost_usd::double precision,
       coalesce(:code::text, (SELECT p.code FROM tasks AS p WHERE p.id = :parent_id::bigint)), :github::text"""
SQL_ADD_TASK, SQL_ADD_TASK_EVER = (dialect(sql) for sql in add_task_sql(_ADD_TASK_VALUES))


# The most urgent due task: one index seek (ix_tasks_claim) per priority level, most
# urgent level first, stopping at the first level that has a due task; so neither
# finished tasks nor many not-yet-due urgent tasks are walked, and nothing is sorted.
# SKIP LOCKED passes over a task another dispatcher is claiming right now; the outer
# ``status = 'pending'`` re-check is what makes a claim exclusive. A pending task
# still claimed is one whose run asked for a retry and has not been recorded yet: no
# second run of it starts until that one has ended.
_NEXT_DUE_ID = """
SELECT c.id FROM generate_series(1, %(max_priority)s::int) AS p (priority)
CROSS JOIN LATERAL (
    SELECT id FROM tasks
    WHERE status = 'pending' AND waiting_on = 0 AND priority = p.priority AND scheduled_for <= %(now)s
      AND claimed_by IS NULL
    ORDER BY scheduled_for, id LIMIT 1
    FOR UPDATE SKIP LOCKED
) AS c
LIMIT 1
"""

# Claim and open its run in one statement (its own transaction when run alone); the
# audit event comes from the status trigger.
SQL_CLAIM = f"""
WITH claimed AS (
    UPDATE tasks SET status = 'active', claimed_by = %(worker)s, lease_until = %(lease_until)s,
           started_at = %(now)s, updated_at = %(now)s, updated_by = 'dispatcher',
           attempt_count = attempt_count + 1, cancel_requested = 0,
           executor = coalesce(%(executor)s, executor)
    WHERE id = ({_NEXT_DUE_ID}) AND status = 'pending'
    RETURNING *
), run AS (
    INSERT INTO runs (task_id, attempt, started_at, executor, claimed_by)
    SELECT id, (SELECT count(*) + 1 FROM runs WHERE task_id = claimed.id), %(now)s, %(executor)s, %(worker)s
    FROM claimed
    RETURNING id, attempt
)
SELECT claimed.*, run.id AS run_id, run.attempt AS run_attempt
FROM claimed, run
"""


def claim(tx: Tx, params: dict[str, Any]) -> tuple[Row, Row] | None:
    """``SQL_CLAIM``: one statement claims and opens the run. Returns the task's row
    and the run's (id, attempt)."""
    row = tx.one(SQL_CLAIM, params)
    if row is None:
        return None
    return row, {"id": row["run_id"], "attempt": row["run_attempt"]}


# The task the dispatcher takes next (the queue's marker): the claim's search, unlocked.
SQL_NEXT_DUE_ID = """
SELECT c.id FROM generate_series(1, 9) AS p (priority)
CROSS JOIN LATERAL (
    SELECT id FROM tasks
    WHERE status = 'pending' AND waiting_on = 0 AND priority = p.priority AND scheduled_for <= %(now)s
      AND claimed_by IS NULL
    ORDER BY scheduled_for, id LIMIT 1
) AS c
LIMIT 1
"""

SQL_NEXT_DUE_AT = """
SELECT min(x.scheduled_for) AS m FROM generate_series(1, 9) AS p (priority)
CROSS JOIN LATERAL (
    SELECT scheduled_for FROM tasks
    WHERE status = 'pending' AND waiting_on = 0 AND priority = p.priority AND claimed_by IS NULL
    ORDER BY scheduled_for LIMIT 1
) AS x
"""

# Newest first, keyset-paged: one backward walk per status asked for, each stopping
# after %(limit)s rows. The statuses are literals (``list_tasks_sql``) so the planner
# sees how rare each one is: a few open tasks are found through ix_tasks_status_id,
# never by walking a million finished ones down the primary key.
_LIST_BRANCH = "(SELECT * FROM tasks WHERE status = '{status}' AND id < %(before_id)s ORDER BY id DESC LIMIT %(limit)s)"


def list_tasks_sql(statuses: Collection[TaskStatus]) -> str:
    """``list_tasks`` for these statuses (each a ``TaskStatus``, so safe as a literal)."""
    branches = " UNION ALL ".join(_LIST_BRANCH.format(status=TaskStatus(s).value) for s in sorted(set(statuses)))
    return f"SELECT * FROM ({branches}) AS t ORDER BY id DESC LIMIT %(limit)s"


def search_tasks_sql(statuses: Collection[TaskStatus]) -> str:
    """``SQL_SEARCH_TASKS`` (the statuses are its ``%(statuses)s`` parameter)."""
    return SQL_SEARCH_TASKS


SQL_SEARCH_TASKS = """
SELECT * FROM tasks
WHERE status = ANY(%(statuses)s::text[]) AND id < %(before_id)s
  AND (subject ILIKE %(pattern)s OR description ILIKE %(pattern)s
       OR source ILIKE %(pattern)s OR coalesce(result_summary, '') ILIKE %(pattern)s)
ORDER BY id DESC LIMIT %(limit)s
"""

# The task window's pieces: ILIKE ignores case; ``?`` finds a string in the JSON array.
WINDOW = WindowDialect(
    contains="{column} ILIKE {param} ESCAPE '\\'",
    has_skill="skills ? CAST({param} AS text)",
    folded="lower({column})",
    skills_text="CAST(skills AS text)",
    unindexed="{column}",
    finish=dialect,
)

SQL_COUNT_BY_STATUS = "SELECT status, n FROM status_counts"


# --- dispatching --------------------------------------------------------------------


SQL_OPEN_RUNS = "SELECT * FROM runs WHERE finished_at IS NULL ORDER BY id"
# Locked: two dispatchers recovering the same dead run settle it once.
SQL_GET_RUN_FOR_UPDATE = "SELECT * FROM runs WHERE id = %(id)s FOR UPDATE"
SQL_TASK_FOR_UPDATE = "SELECT * FROM tasks WHERE id = %(id)s FOR UPDATE"
SQL_SETTLE = dialect(settle_sql("claimed_by IS NOT DISTINCT FROM :worker::text"))


# --- sensors and loop state ---------------------------------------------------------------

SQL_SENSOR_STATES = 'SELECT * FROM sensor_state ORDER BY name COLLATE "C"'
SQL_RECORD_SENSOR_RUN = dialect(sensor_run_sql(":state::jsonb"))
# Locked: two processes recording a skip of one sensor merge them one after the other.
SQL_SENSOR_SKIPS = "SELECT skips, last_run_at FROM sensor_state WHERE name = %(name)s FOR UPDATE"
SQL_SET_SENSOR_SKIPS = dialect(sensor_skips_sql(":skips::jsonb"))


# Written only over the expected value (compared as JSON), in the one statement.
SQL_REPLACE_LOOP_VALUE = """
UPDATE loop_state SET value = %(value)s::jsonb WHERE key = %(key)s AND value = %(expected)s::jsonb RETURNING 1
"""
# Expected absent: a JSON null under the key counts as absent, as on SQLite.
SQL_REPLACE_ABSENT_LOOP_VALUE = """
INSERT INTO loop_state (key, value) VALUES (%(key)s, %(value)s::jsonb)
ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE loop_state.value = 'null'::jsonb
RETURNING 1
"""

# --- flood limits -----------------------------------------------------------------------

# Serialises inserts that count the same source or parent (second key: its hash).
SQL_LOCK_COUNT: str | None = f"SELECT pg_advisory_xact_lock({LOCK_KEY + 1}, hashtext(%(name)s))"

# A refused insert, counted in loop state in the refusing transaction.
SQL_RECORD_REFUSAL = """
INSERT INTO loop_state (key, value)
VALUES (%(key)s, jsonb_build_object('total', 1, 'last_at', %(now)s::bigint,
                                    'last_source', %(source)s::text, 'last_reason', %(reason)s::text))
ON CONFLICT (key) DO UPDATE SET value = excluded.value
    || jsonb_build_object('total', coalesce((loop_state.value ->> 'total')::bigint, 0) + 1)
"""


# The event stream (Store.events_after): a walk up the primary key from after, the
# filters applied on the way; kinds NULL: every kind.
SQL_EVENTS_AFTER = """
SELECT * FROM task_events
WHERE id > %(after)s::bigint AND (%(since)s::bigint IS NULL OR at >= %(since)s::bigint)
  AND (%(task)s::bigint IS NULL OR task_id = %(task)s::bigint)
  AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
ORDER BY id LIMIT %(limit)s
"""


def replace_loop_value(tx: Tx, key: str, expected: object, value: object) -> bool:
    """Write ``value`` only over ``expected``, compared as ``jsonb`` in one statement."""
    sql = SQL_REPLACE_ABSENT_LOOP_VALUE if expected is None else SQL_REPLACE_LOOP_VALUE
    return tx.one(sql, {"key": key, "expected": json.dumps(expected), "value": json.dumps(value)}) is not None
