"""The statements both backends run as written: standard SQL with ``:name``
parameters (``now`` is the store clock's epoch ms). ``sqlite_queries`` and
``postgres_queries`` both export them; the PostgreSQL ``Tx`` rewrites each to
psycopg's ``%(name)s`` once (``postgres_db.dialect``). A statement that needs a
backend's own syntax lives in that backend's queries module instead.
"""

from __future__ import annotations

SQL_ADD_DEP = "INSERT INTO task_deps (task_id, depends_on) VALUES (:task_id, :depends_on) ON CONFLICT DO NOTHING"

# The task a dedup hit names: the open holder (ux_tasks_open_key), else the newest
# task that used the key (ix_tasks_key, already in id order). One row; its id is NULL
# when no task has the key. Never a sort: a sensor that reuses one key every run has
# thousands of finished tasks behind it.
SQL_HOLDER_OF_KEY = """
SELECT coalesce(
    (SELECT id FROM tasks WHERE source_key = :key AND status IN ('pending', 'active', 'blocked')),
    (SELECT id FROM tasks WHERE source_key = :key ORDER BY id DESC LIMIT 1)
) AS id
"""

SQL_SET_RUN_PROCESS = "UPDATE runs SET pid = :pid, pgid = :pgid, proc_start = :proc_start WHERE id = :id"

# The executor a skill chose, on the run and on the task while it is still active.
SQL_SET_RUN_EXECUTOR = "UPDATE runs SET executor = :executor WHERE id = :run_id"
SQL_SET_TASK_EXECUTOR = "UPDATE tasks SET executor = :executor WHERE id = :task_id AND status = 'active'"

SQL_RENEW_LEASE = """
UPDATE tasks SET lease_until = :lease_until WHERE id = :id AND claimed_by = :worker RETURNING cancel_requested
"""

SQL_ACTIVE_TASKS = "SELECT * FROM tasks WHERE status = 'active' ORDER BY id"

SQL_GET_TASK = "SELECT * FROM tasks WHERE id = :id"

SQL_LIST_RUNS = "SELECT * FROM runs WHERE task_id = :id ORDER BY attempt"

SQL_LIST_EVENTS = "SELECT * FROM task_events WHERE task_id = :id ORDER BY id"

SQL_DEPENDENCIES = "SELECT depends_on FROM task_deps WHERE task_id = :id ORDER BY depends_on"

SQL_ADD_NOTE = "INSERT INTO notes (task_id, at, author, text) VALUES (:id, :now, :author, :text) RETURNING *"

SQL_CANCEL = """
UPDATE tasks SET status = CASE WHEN status = 'active' THEN status ELSE 'canceled' END,
       cancel_requested = CASE WHEN status = 'active' THEN 1 ELSE cancel_requested END,
       completed_at = CASE WHEN status = 'active' THEN completed_at ELSE :now END,
       updated_at = :now, updated_by = :actor
WHERE id = :id AND status IN ('pending', 'blocked', 'active') RETURNING *
"""

SQL_SET_PRIORITY = """
UPDATE tasks SET priority = :priority, updated_at = :now, updated_by = :actor
WHERE id = :id AND status IN ('pending', 'blocked') RETURNING *
"""

SQL_DEFER = """
UPDATE tasks SET scheduled_for = :until, updated_at = :now, updated_by = :actor
WHERE id = :id AND status IN ('pending', 'blocked') RETURNING *
"""

# A task that needed approval needs it again: it goes back to waiting for it.
SQL_RETRY = """
UPDATE tasks SET status = CASE WHEN approval IS NULL THEN 'pending' ELSE 'blocked' END,
       approval = CASE WHEN approval IS NULL THEN NULL ELSE 'pending' END,
       scheduled_for = :now, attempt_count = 0,
       completed_at = NULL, cancel_requested = 0, updated_at = :now, updated_by = :actor
WHERE id = :id AND status IN ('failed', 'canceled') RETURNING *
"""

SQL_CLOSE_TASK = """
UPDATE tasks SET status = :status, result_summary = :summary, updated_at = :now, updated_by = :actor,
       completed_at = CASE WHEN :status = 'blocked' THEN NULL ELSE :now END
WHERE id = :id AND status IN ('pending', 'active', 'blocked') RETURNING *
"""

# Only an open run: a claim replayed after its run was recorded (or recovered) must
# not overwrite that record, count its costs twice or touch the next attempt.
SQL_RECORD_RUN = """
UPDATE runs SET finished_at = :now, outcome = :outcome, error = :error, exit_code = :exit_code,
       cost_usd = :cost_usd, api_cost_usd = :api_cost_usd, tokens_in = :tokens_in,
       tokens_out = :tokens_out, cache_read_tokens = :cache_read_tokens,
       cache_write_tokens = :cache_write_tokens, model = :model, session_id = :session_id,
       transcript_path = :transcript_path, permission_denials = :permission_denials
WHERE id = :run_id AND finished_at IS NULL
"""

SQL_ADD_COSTS = """
UPDATE tasks SET cost_usd = cost_usd + :cost_usd, api_cost_usd = api_cost_usd + :api_cost_usd,
       tokens_in = tokens_in + :tokens_in, tokens_out = tokens_out + :tokens_out,
       model = coalesce(:model, model), updated_at = :now
WHERE id = :task_id
"""

# Adds the run's costs too (SQL_ADD_COSTS' columns): one statement for the common case.
SQL_FINISH = """
UPDATE tasks SET status = :status, completed_at = :now, updated_at = :now,
       updated_by = 'dispatcher', claimed_by = NULL, lease_until = NULL,
       result_summary = :summary, result_detail = :detail,
       cost_usd = cost_usd + :cost_usd, api_cost_usd = api_cost_usd + :api_cost_usd,
       tokens_in = tokens_in + :tokens_in, tokens_out = tokens_out + :tokens_out,
       model = coalesce(:model, model)
WHERE id = :task_id AND status = 'active' AND claimed_by = :worker
RETURNING *
"""

SQL_RELEASE_CLOSED = """
UPDATE tasks SET claimed_by = NULL, lease_until = NULL WHERE id = :task_id AND claimed_by = :worker
"""

SQL_APPROVE = """
UPDATE tasks SET status = 'pending', approval = 'approved', updated_at = :now, updated_by = :actor
WHERE id = :id AND status = 'blocked' AND approval = 'pending'
RETURNING *
"""

SQL_REJECT = """
UPDATE tasks SET status = 'canceled', approval = 'rejected', completed_at = :now,
       result_summary = :summary, updated_at = :now, updated_by = :actor
WHERE id = :id AND status = 'blocked' AND approval = 'pending'
RETURNING *
"""

# A claimed task whose skill needs approval goes back unrun: its run row is removed
# and its attempt given back, so the approval wait costs it nothing.
SQL_DROP_OPEN_RUN = "DELETE FROM runs WHERE id = :run_id AND task_id = :task_id AND finished_at IS NULL"

SQL_SENSOR_STATE = "SELECT * FROM sensor_state WHERE name = :name"

SQL_SET_SENSOR_ENABLED = """
INSERT INTO sensor_state (name, enabled) VALUES (:name, :enabled)
ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled
"""

SQL_LOOP_VALUES = "SELECT key, value FROM loop_state"

SQL_LIST_NOTES = "SELECT * FROM notes WHERE task_id = :id ORDER BY id"

SQL_SET_LOOP_VALUE = """
INSERT INTO loop_state (key, value) VALUES (:key, :value) ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""

# The source of the root of a task's parent chain ("sensor:feeds" for a follow-up of
# a follow-up of a feeds task); the chain is short, one primary-key seek per step.
SQL_ORIGIN_OF = """
WITH RECURSIVE up(id, parent_id, source, depth) AS (
    SELECT id, parent_id, source, 0 FROM tasks WHERE id = :id
    UNION ALL
    SELECT t.id, t.parent_id, t.source, up.depth + 1 FROM tasks t JOIN up ON t.id = up.parent_id
)
SELECT source FROM up ORDER BY depth DESC LIMIT 1
"""

# A cancel requested while the attempt ran wins over the retry: the task is canceled,
# not put back (the request may land after the last heartbeat the run saw).
SQL_REQUEUE = """
UPDATE tasks SET status = CASE WHEN cancel_requested = 1 THEN 'canceled' ELSE 'pending' END,
       scheduled_for = CASE WHEN cancel_requested = 1 THEN scheduled_for ELSE :retry_at END,
       completed_at = CASE WHEN cancel_requested = 1 THEN :now ELSE completed_at END,
       updated_at = :now, updated_by = 'dispatcher', claimed_by = NULL, lease_until = NULL,
       attempt_count = attempt_count - :give_back, result_summary = :summary
WHERE id = :task_id AND status = 'active' AND claimed_by = :worker
"""

# The claim's own run is still open: a stale claim (the same worker already on the
# next attempt) must not put that attempt back.
_CLAIM_RUN_OPEN = "EXISTS (SELECT 1 FROM runs WHERE id = :run_id AND task_id = :task_id AND finished_at IS NULL)"

# A cancel requested since the claim wins (as in SQL_REQUEUE): the task is canceled
# rather than put back, where the next claim would clear the request.
SQL_HOLD_FOR_APPROVAL = f"""
UPDATE tasks SET status = CASE WHEN cancel_requested = 1 THEN 'canceled' ELSE 'blocked' END,
       approval = CASE WHEN cancel_requested = 1 THEN approval ELSE 'pending' END,
       completed_at = CASE WHEN cancel_requested = 1 THEN :now ELSE completed_at END,
       attempt_count = attempt_count - 1,
       claimed_by = NULL, lease_until = NULL, updated_at = :now, updated_by = 'dispatcher'
WHERE id = :task_id AND status = 'active' AND claimed_by = :worker AND {_CLAIM_RUN_OPEN}
RETURNING *
"""

# A claimed task put back unrun and due later (a sensor over its budget): its run is
# removed (SQL_DROP_OPEN_RUN) and its attempt given back. A cancel requested since
# the claim wins, as in SQL_HOLD_FOR_APPROVAL.
SQL_RELEASE_UNRUN = f"""
UPDATE tasks SET status = CASE WHEN cancel_requested = 1 THEN 'canceled' ELSE 'pending' END,
       scheduled_for = CASE WHEN cancel_requested = 1 THEN scheduled_for ELSE :retry_at END,
       completed_at = CASE WHEN cancel_requested = 1 THEN :now ELSE completed_at END,
       attempt_count = attempt_count - 1,
       claimed_by = NULL, lease_until = NULL, updated_at = :now, updated_by = 'dispatcher'
WHERE id = :task_id AND status = 'active' AND claimed_by = :worker AND {_CLAIM_RUN_OPEN}
RETURNING *
"""
