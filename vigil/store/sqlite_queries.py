"""The SQL of the SQLite store, named after the ``SqliteStore`` methods that run it.

Kept apart from ``sqlite.py`` so that the store's logic and its queries each stay
short; ``vigil.store.sqlite`` re-exports every name here. Parameters are named
(``:now`` is the clock's epoch ms); nothing here reads the SQL clock.
"""

from __future__ import annotations

from vigil.models import MAX_PRIORITY, MIN_PRIORITY
from vigil.store import CostGroup

_PRIORITIES = range(MIN_PRIORITY, MAX_PRIORITY + 1)

# A new task, deduplicated in the insert itself: an ``open`` key conflicts through
# ux_tasks_open_key, an ``ever`` key through ux_tasks_ever_key or the NOT EXISTS over
# every earlier row or the keys of pruned tasks (retired_keys). DO NOTHING has no
# target on purpose: those indexes are the only unique constraints on tasks, and
# NOT NULL / CHECK failures still raise.
# Parameters are positional (``sqlite._task_params`` builds them): binding by name
# looks every name up per row, a third of the cost of a deduplicated batch row; and
# the ``open`` scope, by far the common one, needs no NOT EXISTS, so it is a plain
# VALUES insert. ?1 subject, ?2 description, ?3 skills, ?4 priority, ?5 source,
# ?6 source_key, ?7 parent_id, ?8 scheduled_for, ?9 now, ?10 actor, ?11 max_retries,
# ?12 requires_approval, ?13 workdir.
_ADD_TASK_COLUMNS = """
INSERT INTO tasks (subject, description, skills, priority, source, source_key, dedup,
                   parent_id, scheduled_for, created_at, updated_at, updated_by, max_retries,
                   status, approval, workdir)"""
_ADD_TASK_STATUS = """CASE WHEN ?12 THEN 'blocked' ELSE 'pending' END, CASE WHEN ?12 THEN 'pending' END"""
SQL_ADD_TASK = f"""{_ADD_TASK_COLUMNS}
VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'open', ?7, ?8, ?9, ?9, ?10, ?11, {_ADD_TASK_STATUS}, ?13)
ON CONFLICT DO NOTHING
RETURNING id
"""
SQL_ADD_TASK_EVER = f"""{_ADD_TASK_COLUMNS}
SELECT ?1, ?2, ?3, ?4, ?5, ?6, 'ever', ?7, ?8, ?9, ?9, ?10, ?11, {_ADD_TASK_STATUS}, ?13
WHERE NOT EXISTS (SELECT 1 FROM tasks WHERE source_key = ?6)
  AND NOT EXISTS (SELECT 1 FROM retired_keys WHERE source_key = ?6)
ON CONFLICT DO NOTHING
RETURNING id
"""

# The task a dedup hit names: the open holder (ux_tasks_open_key), else the newest
# task that used the key (ix_tasks_key, already in id order). One row; its id is NULL
# when no task has the key. Never a sort: a sensor that reuses one key every run has
# thousands of finished tasks behind it.
SQL_HOLDER_OF_KEY = """
SELECT coalesce(
    (SELECT id FROM tasks WHERE source_key = ?1 AND status IN ('pending', 'active', 'blocked')),
    (SELECT id FROM tasks WHERE source_key = ?1 ORDER BY id DESC LIMIT 1)
)
"""


def _next_due_id(most_urgent_last: int) -> str:
    """The most urgent due task's id. ``priority IN (…)`` makes the planner seek
    ix_tasks_claim once per priority, in order, each seek bounded by
    ``scheduled_for <= :now``: neither finished tasks nor many not-yet-due urgent
    tasks are walked, nothing is sorted, and LIMIT 1 ends the walk at the first due
    task. Only priorities up to ``most_urgent_last`` take part (the budget's urgency
    gate)."""
    priorities = ", ".join(str(p) for p in _PRIORITIES if p <= most_urgent_last)
    return f"""SELECT id FROM tasks
        WHERE status = 'pending' AND waiting_on = 0 AND priority IN ({priorities}) AND scheduled_for <= :now
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
# claim_next(max_priority=p): only tasks at least that urgent (priority ≤ p).
SQL_CLAIM_UP_TO = {p: _claim(p) for p in _PRIORITIES}

SQL_OPEN_RUN = """
INSERT INTO runs (task_id, attempt, started_at, executor, claimed_by)
VALUES (:task_id, (SELECT count(*) + 1 FROM runs WHERE task_id = :task_id), :now, :executor, :worker)
RETURNING id, attempt
"""

SQL_NEXT_DUE_AT = (
    "SELECT min(m) FROM ("
    + " UNION ALL ".join(
        f"SELECT min(scheduled_for) AS m FROM tasks WHERE status = 'pending' AND waiting_on = 0 AND priority = {p}"
        for p in _PRIORITIES
    )
    + ")"
)

# Newest first, keyset-paged. ``{statuses}`` becomes one ``:sN`` mark per status asked
# for: ix_tasks_status_id walks each status down from :before_id, and SQLite stops each
# walk after :limit rows, so a million finished tasks are never sorted.
SQL_LIST_TASKS = "SELECT * FROM tasks WHERE status IN ({statuses}) AND id < :before_id ORDER BY id DESC LIMIT :limit"

# Kept by triggers in the same transaction as every status change: no count(*).
SQL_COUNT_BY_STATUS = "SELECT status, n FROM status_counts"

SQL_QUEUE = """
SELECT * FROM tasks WHERE status = 'active'
UNION ALL
SELECT * FROM (SELECT * FROM tasks WHERE status IN ('pending', 'blocked')
               ORDER BY status = 'blocked', waiting_on > 0 OR scheduled_for > :now,
                        CASE WHEN waiting_on = 0 AND scheduled_for <= :now THEN priority END,
                        scheduled_for, priority, id
               LIMIT :limit)
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

# A cancel requested while the attempt ran wins over the retry: the task is canceled,
# not put back (the request may land after the last heartbeat the run saw).
SQL_REQUEUE = """
UPDATE tasks SET status = CASE WHEN cancel_requested THEN 'canceled' ELSE 'pending' END,
       scheduled_for = CASE WHEN cancel_requested THEN scheduled_for ELSE :retry_at END,
       completed_at = CASE WHEN cancel_requested THEN :now ELSE completed_at END,
       updated_at = :now, updated_by = 'dispatcher', claimed_by = NULL, lease_until = NULL,
       attempt_count = attempt_count - :give_back, result_summary = :summary
WHERE id = :task_id AND status = 'active' AND claimed_by = :worker
"""

# ``+id``: ordering by the bare rowid makes SQLite walk every run in id order instead
# of the few rows of the partial index ix_runs_open (a full scan of the history).
SQL_OPEN_RUNS = "SELECT * FROM runs WHERE finished_at IS NULL ORDER BY +id"

# Settles the task of a run a dead dispatcher left open: requeued (attempt counted)
# or finished. Only while the run's worker still holds it, like SQL_FINISH.
SQL_RECOVER = """
UPDATE tasks SET status = :status,
       scheduled_for = CASE WHEN :status = 'pending' THEN :retry_at ELSE scheduled_for END,
       completed_at = CASE WHEN :status = 'pending' THEN completed_at ELSE :now END,
       updated_at = :now, updated_by = 'dispatcher', claimed_by = NULL, lease_until = NULL,
       result_summary = :summary
WHERE id = :task_id AND status = 'active' AND claimed_by IS :worker
"""

# History search: ``+status`` keeps the planner off ix_tasks_status_id so it walks
# the primary key downwards and stops at LIMIT matches (no sort of every finished row).
SQL_SEARCH_TASKS = """
SELECT * FROM tasks
WHERE +status IN :statuses AND id < ?
  AND (subject LIKE ? ESCAPE '\\' OR description LIKE ? ESCAPE '\\'
       OR source LIKE ? ESCAPE '\\' OR coalesce(result_summary, '') LIKE ? ESCAPE '\\')
ORDER BY id DESC LIMIT ?
"""

_COST_COLUMNS = """count(*) AS runs, count(DISTINCT r.task_id) AS tasks,
       total(r.cost_usd) AS cost_usd, total(r.api_cost_usd) AS api_cost_usd,
       total(r.tokens_in) AS tokens_in, total(r.tokens_out) AS tokens_out,
       total(r.cache_read_tokens) AS cache_read_tokens,
       total(r.cache_write_tokens) AS cache_write_tokens"""

# Every roll-up starts from the runs in the window (ix_runs_finished). CROSS JOIN
# keeps SQLite to that order: with ANALYZE statistics it otherwise prefers to walk
# every task by source (ix_tasks_source_created) to skip a sort, reading the whole
# history to report one day.
_LIVE_ROLLUP = {
    CostGroup.DAY: f"""SELECT strftime('%Y-%m-%d', r.finished_at / 1000, 'unixepoch') AS key,
        {_COST_COLUMNS} FROM runs r WHERE r.finished_at >= :since GROUP BY key""",
    CostGroup.HOUR: f"""SELECT strftime('%Y-%m-%dT%H', r.finished_at / 1000, 'unixepoch') AS key,
        {_COST_COLUMNS} FROM runs r WHERE r.finished_at >= :since GROUP BY key""",
    CostGroup.MODEL: f"""SELECT coalesce(r.model, '(none)') AS key, {_COST_COLUMNS}
        FROM runs r WHERE r.finished_at >= :since GROUP BY key""",
    CostGroup.SOURCE: f"""SELECT t.source AS key, {_COST_COLUMNS}
        FROM runs r CROSS JOIN tasks t ON t.id = r.task_id
        WHERE r.finished_at >= :since GROUP BY key""",
    CostGroup.SKILL: f"""SELECT coalesce(s.value, '(none)') AS key, {_COST_COLUMNS}
        FROM runs r CROSS JOIN tasks t ON t.id = r.task_id LEFT JOIN json_each(t.skills) s
        WHERE r.finished_at >= :since GROUP BY 1""",  # not "key": json_each has a column of that name
    # Each run counts for the sensor at the root of its task's parent chain, so the
    # follow-ups an agent added while working on a sensor's task count for that sensor.
    CostGroup.SENSOR: f"""WITH RECURSIVE chain(task_id, parent_id, source) AS (
            SELECT DISTINCT t.id, t.parent_id, t.source FROM runs r CROSS JOIN tasks t ON t.id = r.task_id
            WHERE r.finished_at >= :since
            UNION ALL
            SELECT c.task_id, p.parent_id, p.source FROM chain c JOIN tasks p ON p.id = c.parent_id
        ),
        origin(task_id, key) AS (
            SELECT task_id, CASE WHEN source LIKE 'sensor:%' THEN substr(source, 8) ELSE '(none)' END
            FROM chain WHERE parent_id IS NULL
        )
        SELECT coalesce(o.key, '(none)') AS key, {_COST_COLUMNS}
        FROM runs r LEFT JOIN origin o ON o.task_id = r.task_id
        WHERE r.finished_at >= :since GROUP BY key""",
}


def _archived(key: str, tasks: str, joins: str = "") -> str:
    """The pruned runs' part of a roll-up (sqlite_schema V2): an archived hour, or
    a folded day, counts whole when :since falls inside it (PRIMARY KEY range on
    start_ms: no row starts more than a day before the rows it may count)."""
    return f"""SELECT {key} AS key, sum(a.runs) AS runs, sum(a.{tasks}) AS tasks,
        total(a.cost_usd) AS cost_usd, total(a.api_cost_usd) AS api_cost_usd,
        total(a.tokens_in) AS tokens_in, total(a.tokens_out) AS tokens_out,
        total(a.cache_read_tokens) AS cache_read_tokens, total(a.cache_write_tokens) AS cache_write_tokens
        FROM cost_archive a {joins}
        WHERE a.start_ms > :since - 86400000 AND a.start_ms + a.span_ms > :since GROUP BY 1"""


_ARCHIVED_ROLLUP = {
    CostGroup.DAY: _archived("strftime('%Y-%m-%d', a.start_ms / 1000, 'unixepoch')", "tasks_day"),
    # a folded day has no hours left: it is one key, the day's
    CostGroup.HOUR: _archived(
        "strftime(CASE a.span_ms WHEN 3600000 THEN '%Y-%m-%dT%H' ELSE '%Y-%m-%d' END, a.start_ms / 1000, 'unixepoch')",
        "tasks_hour",
    ),
    CostGroup.MODEL: _archived("a.model", "tasks_model"),
    CostGroup.SOURCE: _archived("a.source", "tasks_last"),
    CostGroup.SKILL: _archived("coalesce(s.value, '(none)')", "tasks_last", "LEFT JOIN json_each(a.skills) s"),
    CostGroup.SENSOR: _archived("a.sensor", "tasks_last"),
}


def _rollup(group: CostGroup) -> str:
    """Live runs and archived runs, summed per key. A task is either live or
    archived (prune takes all its runs), so adding the two task counts is exact."""
    order = "key DESC" if group is CostGroup.DAY or group is CostGroup.HOUR else "cost_usd DESC, key"
    return f"""SELECT key, sum(runs) AS runs, sum(tasks) AS tasks, total(cost_usd) AS cost_usd,
        total(api_cost_usd) AS api_cost_usd, total(tokens_in) AS tokens_in, total(tokens_out) AS tokens_out,
        total(cache_read_tokens) AS cache_read_tokens, total(cache_write_tokens) AS cache_write_tokens
    FROM (SELECT * FROM ({_LIVE_ROLLUP[group]}) UNION ALL SELECT * FROM ({_ARCHIVED_ROLLUP[group]}))
    GROUP BY key ORDER BY {order}"""


SQL_COST_ROLLUP = {group: _rollup(group) for group in CostGroup}

SQL_RECORD_SENSOR_RUN = """
INSERT INTO sensor_state (name, last_run_at, last_duration_ms, last_status, last_error,
                          consecutive_failures, created_last, ignored_last, dropped_last,
                          rejected_last, next_due_at, state)
VALUES (:name, :started_at, :duration_ms, :status, :error, :failures, :created, :ignored,
        :dropped, :rejected, :next_due_at, coalesce(:state, '{}'))
ON CONFLICT (name) DO UPDATE SET
    last_run_at = excluded.last_run_at, last_duration_ms = excluded.last_duration_ms,
    last_status = excluded.last_status, last_error = excluded.last_error,
    consecutive_failures = excluded.consecutive_failures, created_last = excluded.created_last,
    ignored_last = excluded.ignored_last, dropped_last = excluded.dropped_last,
    rejected_last = excluded.rejected_last,
    next_due_at = excluded.next_due_at, state = coalesce(:state, sensor_state.state)
"""

# --- guardrails: flood limits, spend, approvals ------------------------------------

# Depth the new task would have: 1 for a child of a root task, one more per ancestor.
# Stops one step past :max_depth, which is all the limit needs to know.
SQL_FOLLOW_UP_DEPTH = """
WITH RECURSIVE chain(id, depth) AS (
    SELECT :parent_id, 1
    UNION ALL
    SELECT t.parent_id, c.depth + 1 FROM tasks t JOIN chain c ON t.id = c.id
    WHERE t.parent_id IS NOT NULL AND c.depth <= :max_depth
)
SELECT max(depth) FROM chain
"""

# Both counts stop at :cap rows (ix_tasks_parent, ix_tasks_source_created).
SQL_COUNT_CHILDREN = "SELECT count(*) FROM (SELECT 1 FROM tasks WHERE parent_id = :parent_id LIMIT :cap)"
SQL_COUNT_SOURCE_SINCE = """
SELECT count(*) FROM (SELECT 1 FROM tasks WHERE source = :source AND created_at > :since LIMIT :cap)
"""

# Pruned tasks' spend is in the archive, by hour or folded day (one counts whole, as
# in SQL_COST_ROLLUP: for a budget that errs on the side of spend).
SQL_SPEND_SINCE = """
SELECT (SELECT total(cost_usd) FROM runs WHERE finished_at >= ?1)
     + (SELECT total(cost_usd) FROM cost_archive WHERE start_ms > ?1 - 86400000 AND start_ms + span_ms > ?1)
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
# The claim's own run is still open: a stale claim (the same worker already on the
# next attempt) must not put that attempt back.
_CLAIM_RUN_OPEN = "EXISTS (SELECT 1 FROM runs WHERE id = :run_id AND task_id = :task_id AND finished_at IS NULL)"

# A cancel requested since the claim wins (as in SQL_REQUEUE): the task is canceled
# rather than put back, where the next claim would clear the request.
SQL_HOLD_FOR_APPROVAL = f"""
UPDATE tasks SET status = CASE WHEN cancel_requested THEN 'canceled' ELSE 'blocked' END,
       approval = CASE WHEN cancel_requested THEN approval ELSE 'pending' END,
       completed_at = CASE WHEN cancel_requested THEN :now ELSE completed_at END,
       attempt_count = attempt_count - 1,
       claimed_by = NULL, lease_until = NULL, updated_at = :now, updated_by = 'dispatcher'
WHERE id = :task_id AND status = 'active' AND claimed_by = :worker AND {_CLAIM_RUN_OPEN}
RETURNING *
"""

SQL_LOOP_VALUE = "SELECT value FROM loop_state WHERE key = ?"
SQL_LOOP_VALUES = "SELECT key, value FROM loop_state"
SQL_LIST_NOTES = "SELECT * FROM notes WHERE task_id = ? ORDER BY id"
SQL_SET_LOOP_VALUE = """
INSERT INTO loop_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""

# The source of the root of a task's parent chain ("sensor:feeds" for a follow-up of
# a follow-up of a feeds task); the chain is short, one primary-key seek per step.
SQL_ORIGIN_OF = """
WITH RECURSIVE up(id, parent_id, source, depth) AS (
    SELECT id, parent_id, source, 0 FROM tasks WHERE id = ?
    UNION ALL
    SELECT t.id, t.parent_id, t.source, up.depth + 1 FROM tasks t JOIN up ON t.id = up.parent_id
)
SELECT source FROM up ORDER BY depth DESC LIMIT 1
"""

# A claimed task put back unrun and due later (a sensor over its budget): its run is
# removed (SQL_DROP_OPEN_RUN) and its attempt given back. A cancel requested since
# the claim wins, as in SQL_HOLD_FOR_APPROVAL.
SQL_RELEASE_UNRUN = f"""
UPDATE tasks SET status = CASE WHEN cancel_requested THEN 'canceled' ELSE 'pending' END,
       scheduled_for = CASE WHEN cancel_requested THEN scheduled_for ELSE :retry_at END,
       completed_at = CASE WHEN cancel_requested THEN :now ELSE completed_at END,
       attempt_count = attempt_count - 1,
       claimed_by = NULL, lease_until = NULL, updated_at = :now, updated_by = 'dispatcher'
WHERE id = :task_id AND status = 'active' AND claimed_by = :worker AND {_CLAIM_RUN_OPEN}
RETURNING *
"""
