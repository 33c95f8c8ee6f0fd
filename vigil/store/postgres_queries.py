"""The SQL of the PostgreSQL store, named after the methods that run it.

Parameters are psycopg's named ``%(name)s`` (so a literal percent sign is ``%%``);
``%(now)s`` is the clock's epoch ms: nothing here reads the server's clock. The
meaning of each statement is that of its SQLite twin in ``sqlite_queries``.
"""

from __future__ import annotations

from collections.abc import Collection

from vigil.models import TaskStatus

_OPEN = "('pending', 'active', 'blocked')"

# A new task, deduplicated in the insert itself: an ``open`` key conflicts through
# ux_tasks_open_key, an ``ever`` key through ux_tasks_ever_key or the NOT EXISTS over
# every earlier row or the keys of pruned tasks (retired_keys). DO NOTHING has no
# target on purpose: those indexes are the only unique constraints a new row can
# meet, and NOT NULL / CHECK failures still raise.
# Casts: in INSERT … SELECT an untyped parameter would otherwise be taken as text.
_ADD_TASK_COLUMNS = """
INSERT INTO tasks (subject, description, skills, priority, source, source_key, dedup,
                   parent_id, scheduled_for, created_at, updated_at, updated_by, max_retries,
                   status, approval, model, workdir)"""
_ADD_TASK_VALUES = """%(subject)s::text, %(description)s::text, %(skills)s::jsonb, %(priority)s::int,
       %(source)s::text, %(source_key)s::text, %(dedup)s::text, %(parent_id)s::bigint,
       %(scheduled_for)s::bigint, %(now)s::bigint, %(now)s::bigint, %(actor)s::text, %(max_retries)s::int,
       CASE WHEN %(approval)s::bool THEN 'blocked' ELSE 'pending' END,
       CASE WHEN %(approval)s::bool THEN 'pending' END, %(model)s::text, %(workdir)s::text"""
SQL_ADD_TASK = f"""{_ADD_TASK_COLUMNS}
VALUES ({_ADD_TASK_VALUES})
ON CONFLICT DO NOTHING
RETURNING id
"""
SQL_ADD_TASK_EVER = f"""{_ADD_TASK_COLUMNS}
SELECT {_ADD_TASK_VALUES}
WHERE NOT EXISTS (SELECT 1 FROM tasks WHERE source_key = %(source_key)s::text)
  AND NOT EXISTS (SELECT 1 FROM retired_keys WHERE source_key = %(source_key)s::text)
ON CONFLICT DO NOTHING
RETURNING id
"""

SQL_ADD_DEPS = """
INSERT INTO task_deps (task_id, depends_on) SELECT %(task_id)s, d FROM unnest(%(deps)s::bigint[]) AS d
ON CONFLICT DO NOTHING
"""

SQL_EXISTING_IDS = "SELECT id FROM tasks WHERE id = ANY(%(ids)s::bigint[])"

# The task a dedup hit names: the open holder, else the newest task that used the key.
SQL_HOLDER_OF_KEY = f"""
SELECT coalesce(
    (SELECT id FROM tasks WHERE source_key = %(key)s AND status IN {_OPEN}),
    (SELECT id FROM tasks WHERE source_key = %(key)s ORDER BY id DESC LIMIT 1)
) AS id
"""

# The most urgent due task: one index seek (ix_tasks_claim) per priority level, most
# urgent level first, stopping at the first level that has a due task; so neither
# finished tasks nor many not-yet-due urgent tasks are walked, and nothing is sorted.
# SKIP LOCKED passes over a task another dispatcher is claiming right now; the outer
# ``status = 'pending'`` re-check is what makes a claim exclusive.
_NEXT_DUE_ID = """
SELECT c.id FROM generate_series(1, %(max_priority)s::int) AS p (priority)
CROSS JOIN LATERAL (
    SELECT id FROM tasks
    WHERE status = 'pending' AND waiting_on = 0 AND priority = p.priority AND scheduled_for <= %(now)s
    ORDER BY scheduled_for, id LIMIT 1
    FOR UPDATE SKIP LOCKED
) AS c
LIMIT 1
"""

# Claim, open its run and read its notes in one statement (its own transaction when
# run alone); the audit event comes from the status trigger.
_CLAIM = f"""
WITH claimed AS (
    UPDATE tasks SET status = 'active', claimed_by = %(worker)s, lease_until = %(lease_until)s,
           started_at = %(now)s, updated_at = %(now)s, updated_by = 'dispatcher',
           attempt_count = attempt_count + 1, cancel_requested = 0,
           executor = coalesce(%(executor)s, executor)
    WHERE id = ({_NEXT_DUE_ID}) AND status = 'pending'{{only_if}}
    RETURNING *
), run AS (
    INSERT INTO runs (task_id, attempt, started_at, executor, claimed_by)
    SELECT id, (SELECT count(*) + 1 FROM runs WHERE task_id = claimed.id), %(now)s, %(executor)s, %(worker)s
    FROM claimed
    RETURNING id, attempt
)
SELECT claimed.*, run.id AS run_id, run.attempt AS run_attempt,
       (SELECT coalesce(jsonb_agg(to_jsonb(n) ORDER BY n.id), '[]') FROM notes n
        WHERE n.task_id = claimed.id) AS claim_notes
FROM claimed, run
"""
SQL_CLAIM = _CLAIM.format(only_if="")
# finish_and_claim(if_version=…): claims only while the loop-state version is one of
# %(versions)s (the version read, or versions this store's own writes made since).
# FOR SHARE: a loop-state write (the gate) at that moment waits for this commit, so
# it cannot land between the check and the claim.
SQL_CLAIM_IF_VERSION = _CLAIM.format(
    only_if="\n      AND (SELECT version FROM loop_state_version FOR SHARE) = ANY(%(versions)s::bigint[])"
)

SQL_NEXT_DUE_AT = """
SELECT min(x.scheduled_for) AS m FROM generate_series(1, 9) AS p (priority)
CROSS JOIN LATERAL (
    SELECT scheduled_for FROM tasks
    WHERE status = 'pending' AND waiting_on = 0 AND priority = p.priority
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


SQL_SEARCH_TASKS = """
SELECT * FROM tasks
WHERE status = ANY(%(statuses)s::text[]) AND id < %(before_id)s
  AND (subject ILIKE %(pattern)s OR description ILIKE %(pattern)s
       OR source ILIKE %(pattern)s OR coalesce(result_summary, '') ILIKE %(pattern)s)
ORDER BY id DESC LIMIT %(limit)s
"""

# Summed over the per-session slots (see postgres_schema).
SQL_COUNT_BY_STATUS = "SELECT status, sum(n)::bigint AS n FROM status_counts GROUP BY status"

SQL_QUEUE = """
(SELECT * FROM tasks WHERE status = 'active' ORDER BY id)
UNION ALL
(SELECT * FROM tasks WHERE status IN ('pending', 'blocked')
 ORDER BY status = 'blocked', (waiting_on > 0 OR scheduled_for > %(now)s),
          CASE WHEN waiting_on = 0 AND scheduled_for <= %(now)s THEN priority END,
          scheduled_for, priority, id
 LIMIT %(limit)s)
"""

SQL_GET_TASK = "SELECT * FROM tasks WHERE id = %(id)s"
SQL_LIST_RUNS = "SELECT * FROM runs WHERE task_id = %(id)s ORDER BY attempt"
SQL_LIST_EVENTS = "SELECT * FROM task_events WHERE task_id = %(id)s ORDER BY id"
SQL_LIST_NOTES = "SELECT * FROM notes WHERE task_id = %(id)s ORDER BY id"
SQL_DEPENDENCIES = "SELECT depends_on FROM task_deps WHERE task_id = %(id)s ORDER BY depends_on"
SQL_ADD_NOTE = """
INSERT INTO notes (task_id, at, author, text) VALUES (%(id)s, %(now)s, %(author)s, %(text)s) RETURNING *
"""

SQL_CANCEL = """
UPDATE tasks SET status = CASE WHEN status = 'active' THEN status ELSE 'canceled' END,
       cancel_requested = CASE WHEN status = 'active' THEN 1 ELSE cancel_requested END,
       completed_at = CASE WHEN status = 'active' THEN completed_at ELSE %(now)s END,
       updated_at = %(now)s, updated_by = %(actor)s
WHERE id = %(id)s AND status IN ('pending', 'blocked', 'active') RETURNING *
"""

SQL_SET_PRIORITY = """
UPDATE tasks SET priority = %(priority)s, updated_at = %(now)s, updated_by = %(actor)s
WHERE id = %(id)s AND status = ANY(%(allowed)s::text[]) RETURNING *
"""

SQL_DEFER = """
UPDATE tasks SET scheduled_for = %(until)s, updated_at = %(now)s, updated_by = %(actor)s
WHERE id = %(id)s AND status = ANY(%(allowed)s::text[]) RETURNING *
"""

# A task that needed approval needs it again: it goes back to waiting for it.
SQL_RETRY = """
UPDATE tasks SET status = CASE WHEN approval IS NULL THEN 'pending' ELSE 'blocked' END,
       approval = CASE WHEN approval IS NULL THEN NULL ELSE 'pending' END,
       scheduled_for = %(now)s, attempt_count = 0,
       completed_at = NULL, cancel_requested = 0, updated_at = %(now)s, updated_by = %(actor)s
WHERE id = %(id)s AND status = ANY(%(allowed)s::text[]) RETURNING *
"""

SQL_CLOSE_TASK = """
UPDATE tasks SET status = %(status)s, result_summary = %(summary)s, updated_at = %(now)s,
       updated_by = %(actor)s,
       completed_at = CASE WHEN %(status)s = 'blocked' THEN NULL ELSE %(now)s END
WHERE id = %(id)s AND status = ANY(%(allowed)s::text[]) RETURNING *
"""

SQL_APPROVE = """
UPDATE tasks SET status = 'pending', approval = 'approved', updated_at = %(now)s, updated_by = %(actor)s
WHERE id = %(id)s AND status = 'blocked' AND approval = 'pending'
RETURNING *
"""

SQL_REJECT = """
UPDATE tasks SET status = 'canceled', approval = 'rejected', completed_at = %(now)s,
       result_summary = %(summary)s, updated_at = %(now)s, updated_by = %(actor)s
WHERE id = %(id)s AND status = 'blocked' AND approval = 'pending'
RETURNING *
"""

# --- dispatching --------------------------------------------------------------------

SQL_SET_RUN_PROCESS = "UPDATE runs SET pid = %(pid)s, pgid = %(pgid)s, proc_start = %(proc_start)s WHERE id = %(id)s"

# One statement, so one transaction: the run's and the (still active) task's executor.
SQL_SET_EXECUTOR = """
WITH run AS (UPDATE runs SET executor = %(executor)s WHERE id = %(run_id)s)
UPDATE tasks SET executor = %(executor)s WHERE id = %(task_id)s AND status = 'active'
"""

SQL_RENEW_LEASE = """
UPDATE tasks SET lease_until = %(lease_until)s WHERE id = %(id)s AND claimed_by = %(worker)s
RETURNING cancel_requested
"""

# Only an open run: a replayed claim must not overwrite its record or count costs twice.
# The task's costs are added in the same statement.
SQL_RECORD_RUN = """
WITH recorded AS (
    UPDATE runs SET finished_at = %(now)s, outcome = %(outcome)s, error = %(error)s,
           exit_code = %(exit_code)s, cost_usd = %(cost_usd)s, api_cost_usd = %(api_cost_usd)s,
           tokens_in = %(tokens_in)s, tokens_out = %(tokens_out)s,
           cache_read_tokens = %(cache_read_tokens)s, cache_write_tokens = %(cache_write_tokens)s,
           model = %(model)s, session_id = %(session_id)s, transcript_path = %(transcript_path)s,
           permission_denials = %(permission_denials)s
    WHERE id = %(run_id)s AND finished_at IS NULL
    RETURNING task_id
)
UPDATE tasks SET cost_usd = cost_usd + %(cost_usd)s, api_cost_usd = api_cost_usd + %(api_cost_usd)s,
       tokens_in = tokens_in + %(tokens_in)s, tokens_out = tokens_out + %(tokens_out)s,
       model = coalesce(%(model)s, model), updated_at = %(now)s
FROM recorded WHERE tasks.id = recorded.task_id AND tasks.id = %(task_id)s
RETURNING tasks.id
"""

# Finish in one statement: record the open run, add its costs to the task and, while
# this worker still holds the task active, set its final status; a task the agent
# closed itself keeps its status and only loses the claim. No row: the run was
# already recorded (a replayed claim) and nothing changed.
_HOLDS = "(status = 'active' AND claimed_by = %(worker)s)"
SQL_FINISH = f"""
WITH recorded AS (
    UPDATE runs SET finished_at = %(now)s, outcome = %(outcome)s, error = %(error)s,
           exit_code = %(exit_code)s, cost_usd = %(cost_usd)s, api_cost_usd = %(api_cost_usd)s,
           tokens_in = %(tokens_in)s, tokens_out = %(tokens_out)s,
           cache_read_tokens = %(cache_read_tokens)s, cache_write_tokens = %(cache_write_tokens)s,
           model = %(model)s, session_id = %(session_id)s, transcript_path = %(transcript_path)s,
           permission_denials = %(permission_denials)s
    WHERE id = %(run_id)s AND finished_at IS NULL
    RETURNING task_id
)
UPDATE tasks SET cost_usd = cost_usd + %(cost_usd)s, api_cost_usd = api_cost_usd + %(api_cost_usd)s,
       tokens_in = tokens_in + %(tokens_in)s, tokens_out = tokens_out + %(tokens_out)s,
       model = coalesce(%(model)s, model), updated_at = %(now)s,
       status = CASE WHEN {_HOLDS} THEN %(status)s ELSE status END,
       completed_at = CASE WHEN {_HOLDS} THEN %(now)s ELSE completed_at END,
       updated_by = CASE WHEN {_HOLDS} THEN 'dispatcher' ELSE updated_by END,
       result_summary = CASE WHEN {_HOLDS} THEN %(summary)s ELSE result_summary END,
       result_detail = CASE WHEN {_HOLDS} THEN %(detail)s ELSE result_detail END,
       claimed_by = CASE WHEN claimed_by = %(worker)s THEN NULL ELSE claimed_by END,
       lease_until = CASE WHEN claimed_by = %(worker)s THEN NULL ELSE lease_until END
FROM recorded WHERE tasks.id = recorded.task_id AND tasks.id = %(task_id)s
RETURNING tasks.*
"""

SQL_RELEASE_CLOSED = """
UPDATE tasks SET claimed_by = NULL, lease_until = NULL WHERE id = %(task_id)s AND claimed_by = %(worker)s
"""

# A cancel requested while the attempt ran wins over the retry.
SQL_REQUEUE = """
UPDATE tasks SET status = CASE WHEN cancel_requested = 1 THEN 'canceled' ELSE 'pending' END,
       scheduled_for = CASE WHEN cancel_requested = 1 THEN scheduled_for ELSE %(retry_at)s END,
       completed_at = CASE WHEN cancel_requested = 1 THEN %(now)s ELSE completed_at END,
       updated_at = %(now)s, updated_by = 'dispatcher', claimed_by = NULL, lease_until = NULL,
       attempt_count = attempt_count - %(give_back)s, result_summary = %(summary)s
WHERE id = %(task_id)s AND status = 'active' AND claimed_by = %(worker)s
RETURNING *
"""

SQL_OPEN_RUNS = "SELECT * FROM runs WHERE finished_at IS NULL ORDER BY id"
# Locked: two dispatchers recovering the same dead run settle it once.
SQL_GET_RUN_LOCKED = "SELECT * FROM runs WHERE id = %(id)s FOR UPDATE"
SQL_ACTIVE_TASKS = "SELECT * FROM tasks WHERE status = 'active' ORDER BY id"

SQL_RECOVER = """
UPDATE tasks SET status = %(status)s,
       scheduled_for = CASE WHEN %(status)s = 'pending' THEN %(retry_at)s::bigint ELSE scheduled_for END,
       completed_at = CASE WHEN %(status)s = 'pending' THEN completed_at ELSE %(now)s END,
       updated_at = %(now)s, updated_by = 'dispatcher', claimed_by = NULL, lease_until = NULL,
       result_summary = %(summary)s
WHERE id = %(task_id)s AND status = 'active' AND claimed_by IS NOT DISTINCT FROM %(worker)s::text
"""

SQL_DROP_OPEN_RUN = "DELETE FROM runs WHERE id = %(run_id)s AND task_id = %(task_id)s AND finished_at IS NULL"
_CLAIM_RUN_OPEN = "EXISTS (SELECT 1 FROM runs WHERE id = %(run_id)s AND task_id = %(task_id)s AND finished_at IS NULL)"

SQL_HOLD_FOR_APPROVAL = f"""
UPDATE tasks SET status = CASE WHEN cancel_requested = 1 THEN 'canceled' ELSE 'blocked' END,
       approval = CASE WHEN cancel_requested = 1 THEN approval ELSE 'pending' END,
       completed_at = CASE WHEN cancel_requested = 1 THEN %(now)s ELSE completed_at END,
       attempt_count = attempt_count - 1,
       claimed_by = NULL, lease_until = NULL, updated_at = %(now)s, updated_by = 'dispatcher'
WHERE id = %(task_id)s AND status = 'active' AND claimed_by = %(worker)s AND {_CLAIM_RUN_OPEN}
RETURNING *
"""

SQL_RELEASE_UNRUN = f"""
UPDATE tasks SET status = CASE WHEN cancel_requested = 1 THEN 'canceled' ELSE 'pending' END,
       scheduled_for = CASE WHEN cancel_requested = 1 THEN scheduled_for ELSE %(retry_at)s END,
       completed_at = CASE WHEN cancel_requested = 1 THEN %(now)s ELSE completed_at END,
       attempt_count = attempt_count - 1,
       claimed_by = NULL, lease_until = NULL, updated_at = %(now)s, updated_by = 'dispatcher'
WHERE id = %(task_id)s AND status = 'active' AND claimed_by = %(worker)s AND {_CLAIM_RUN_OPEN}
RETURNING *
"""

SQL_ORIGIN_OF = """
WITH RECURSIVE up(id, parent_id, source, depth) AS (
    SELECT id, parent_id, source, 0 FROM tasks WHERE id = %(id)s
    UNION ALL
    SELECT t.id, t.parent_id, t.source, up.depth + 1 FROM tasks t JOIN up ON t.id = up.parent_id
)
SELECT source FROM up ORDER BY depth DESC LIMIT 1
"""

# --- sensors and loop state ---------------------------------------------------------------

SQL_SENSOR_STATES = 'SELECT * FROM sensor_state ORDER BY name COLLATE "C"'
SQL_SENSOR_STATE = "SELECT * FROM sensor_state WHERE name = %(name)s"

SQL_RECORD_SENSOR_RUN = """
INSERT INTO sensor_state (name, last_run_at, last_duration_ms, last_status, last_error,
                          consecutive_failures, created_last, ignored_last, dropped_last,
                          rejected_last, next_due_at, state)
VALUES (%(name)s, %(started_at)s, %(duration_ms)s, %(status)s, %(error)s, %(failures)s, %(created)s,
        %(ignored)s, %(dropped)s, %(rejected)s, %(next_due_at)s, coalesce(%(state)s::jsonb, '{}'))
ON CONFLICT (name) DO UPDATE SET
    last_run_at = excluded.last_run_at, last_duration_ms = excluded.last_duration_ms,
    last_status = excluded.last_status, last_error = excluded.last_error,
    consecutive_failures = excluded.consecutive_failures, created_last = excluded.created_last,
    ignored_last = excluded.ignored_last, dropped_last = excluded.dropped_last,
    rejected_last = excluded.rejected_last,
    next_due_at = excluded.next_due_at, state = coalesce(%(state)s::jsonb, sensor_state.state)
"""

SQL_SET_SENSOR_ENABLED = """
INSERT INTO sensor_state (name, enabled) VALUES (%(name)s, %(enabled)s)
ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled
"""

SQL_LOOP_VALUES = "SELECT key, value FROM loop_state"
SQL_SET_LOOP_VALUES = """
INSERT INTO loop_state (key, value)
SELECT k, v FROM unnest(%(keys)s::text[], %(values)s::jsonb[]) AS x (k, v)
ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""
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
SQL_LOOP_VERSION = "SELECT version FROM loop_state_version"
# The values and their version from one snapshot, in one round trip.
SQL_VERSIONED_LOOP_VALUES = """
SELECT (SELECT version FROM loop_state_version) AS version,
       coalesce((SELECT jsonb_object_agg(key, value) FROM loop_state), '{}'::jsonb) AS loop_values
"""

# --- flood limits -----------------------------------------------------------------------

# Serialises inserts that count the same source or parent (second key: its hash).
SQL_LOCK_COUNT = "SELECT pg_advisory_xact_lock(%(lock_key)s, hashtext(%(name)s))"

SQL_FOLLOW_UP_DEPTH = """
WITH RECURSIVE chain(id, depth) AS (
    SELECT %(parent_id)s::bigint, 1
    UNION ALL
    SELECT t.parent_id, c.depth + 1 FROM tasks t JOIN chain c ON t.id = c.id
    WHERE t.parent_id IS NOT NULL AND c.depth <= %(max_depth)s
)
SELECT max(depth) AS depth FROM chain
"""
SQL_COUNT_CHILDREN = (
    "SELECT count(*) AS n FROM (SELECT 1 FROM tasks WHERE parent_id = %(parent_id)s LIMIT %(cap)s) AS x"
)
SQL_COUNT_SOURCE_SINCE = """
SELECT count(*) AS n FROM (SELECT 1 FROM tasks WHERE source = %(source)s AND created_at > %(since)s
                           LIMIT %(cap)s) AS x
"""

# An active task asks for a later retry (Store.request_retry). With no retry left it
# fails for good, as the dispatcher's own retries do; a requested cancel wins (the
# row does not match, and the dispatcher ends the run).
SQL_REQUEST_RETRY = """
UPDATE tasks SET status = CASE WHEN attempt_count > max_retries THEN 'failed' ELSE 'pending' END,
       scheduled_for = CASE WHEN attempt_count > max_retries THEN scheduled_for ELSE %(retry_at)s END,
       completed_at = CASE WHEN attempt_count > max_retries THEN %(now)s::bigint END,
       result_summary = CASE WHEN attempt_count > max_retries
           THEN 'gave up after ' || attempt_count
                || CASE WHEN attempt_count = 1 THEN ' attempt: ' ELSE ' attempts: ' END || %(summary)s::text
           ELSE %(summary)s::text END,
       updated_at = %(now)s::bigint, updated_by = %(actor)s
WHERE id = %(id)s AND status = 'active' AND cancel_requested = 0
RETURNING *
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
