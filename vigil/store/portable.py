"""The statements both backends run as written: standard SQL with ``:name``
parameters (``now`` is the store clock's epoch ms). ``sqlite_queries`` and
``postgres_queries`` both export them; the PostgreSQL ``Tx`` rewrites each to
psycopg's ``%(name)s`` once (``dialect``). A statement that needs a backend's own
syntax lives in that backend's queries module instead; one whose shape is shared but
whose pieces are not (the cost roll-ups) is built here from the backend's pieces.
"""

from __future__ import annotations

import re


def dialect(sql: str) -> str:
    """A ``portable`` statement in psycopg's style: ``:name`` becomes ``%(name)s``
    (a ``::`` cast is left alone), a literal ``%`` becomes ``%%``."""
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql.replace("%", "%%"))


# A new task, deduplicated in the insert itself: an ``open`` key conflicts through
# ux_tasks_open_key, an ``ever`` key through ux_tasks_ever_key or the NOT EXISTS over
# every earlier row or the keys of pruned tasks (retired_keys). DO NOTHING has no
# target on purpose: those indexes are the only unique constraints a new row can
# meet, and NOT NULL / CHECK failures still raise.
_ADD_TASK_COLUMNS = """
INSERT INTO tasks (subject, description, skills, priority, source, source_key, dedup,
                   parent_id, scheduled_for, created_at, updated_at, updated_by, max_retries,
                   status, approval, model, workdir, max_cost_usd, code, github)"""


def add_task_sql(values: str) -> tuple[str, str]:
    """``SQL_ADD_TASK`` and ``SQL_ADD_TASK_EVER`` around a backend's ``values`` (the
    new row's expressions over the named parameters). The ``open`` scope, by far the
    common one, needs no NOT EXISTS, so it is a plain VALUES insert."""
    plain = f"""{_ADD_TASK_COLUMNS}
VALUES ({values})
ON CONFLICT DO NOTHING
RETURNING id
"""
    ever = f"""{_ADD_TASK_COLUMNS}
SELECT {values}
WHERE NOT EXISTS (SELECT 1 FROM tasks WHERE source_key = :source_key)
  AND NOT EXISTS (SELECT 1 FROM retired_keys WHERE source_key = :source_key)
ON CONFLICT DO NOTHING
RETURNING id
"""
    return plain, ever


SQL_ADD_DEP = "INSERT INTO task_deps (task_id, depends_on) VALUES (:task_id, :depends_on) ON CONFLICT DO NOTHING"

# The task a dedup hit names: the open holder (ux_tasks_open_key), else the newest
# task that used the key (ix_tasks_key, already in id order). One row; its id is NULL
# when no task has the key. Never a sort: a sensor that reuses one key every run has
# thousands of finished tasks behind it.
SQL_HOLDER_OF_KEY = """
SELECT coalesce(
    (SELECT id FROM tasks WHERE source_key = :key AND status IN ('pending', 'active', 'blocked', 'waiting')),
    (SELECT id FROM tasks WHERE source_key = :key ORDER BY id DESC LIMIT 1)
) AS id
"""

SQL_GET_RUN = "SELECT * FROM runs WHERE id = :id"

# What waits for a person, and the runs since :since whose agent was refused something.
SQL_ATTENTION = """
SELECT (SELECT count(*) FROM tasks WHERE status = 'blocked' AND review = 'pending') AS awaiting_review,
       (SELECT count(*) FROM tasks WHERE status = 'blocked' AND approval = 'pending') AS awaiting_approval,
       (SELECT count(*) FROM runs WHERE finished_at >= :since AND permission_denials IS NOT NULL) AS denied_runs
"""

SQL_SET_RUN_PROCESS = """
UPDATE runs SET pid = :pid, pgid = :pgid, proc_start = :proc_start, workspace = :workspace, gated = :gated
WHERE id = :id
"""

# The worktree Vigil made (or made again) for a task, before its agent starts.
SQL_SET_WORKTREE = "UPDATE tasks SET worktree = :worktree WHERE id = :id RETURNING *"
SQL_SET_GITHUB = "UPDATE tasks SET github = :github WHERE id = :id RETURNING *"

# The executor a skill chose, on the run and on the task while it is still active.
SQL_SET_RUN_EXECUTOR = "UPDATE runs SET executor = :executor WHERE id = :run_id"
SQL_SET_TASK_EXECUTOR = "UPDATE tasks SET executor = :executor WHERE id = :task_id AND status = 'active'"

SQL_RENEW_LEASE = """
UPDATE tasks SET lease_until = :lease_until WHERE id = :id AND claimed_by = :worker RETURNING cancel_requested
"""

# The queue as the TUI shows it: every active task (by id), then the waiting ones,
# due first in claim order, then not-yet-due, then those waiting for a person
# (blocked, or waiting for an answer), at most :limit of them.
SQL_QUEUE = """
SELECT * FROM (SELECT * FROM tasks WHERE status = 'active' ORDER BY id) AS running
UNION ALL
SELECT * FROM (SELECT * FROM tasks WHERE status IN ('pending', 'blocked', 'waiting')
               ORDER BY status IN ('blocked', 'waiting'), (waiting_on > 0 OR scheduled_for > :now),
                        CASE WHEN waiting_on = 0 AND scheduled_for <= :now THEN priority END,
                        scheduled_for, priority, id
               LIMIT :limit) AS waiting
"""


def settle_sql(worker_matches: str) -> str:
    """``SQL_SETTLE``: writes a task's fate (``vigil.fate.Fate``: :status, :retry_at
    NULL to keep the due time, :give_back 1 to give the attempt back, :summary and
    :detail both NULL to keep them (either given: both are this run's, so a later
    run's summary never sits beside an earlier run's detail), :review / :approval 1 to set that state pending) and
    adds its run's costs (:cost_usd … :denials; zeros for a task put back unrun),
    releasing the claim; only while the task is active under :worker, so a claim
    that lost the task (to crash recovery, or its agent closed it) writes nothing.
    ``worker_matches`` compares ``claimed_by`` with :worker, NULL matching NULL
    (SQLite's ``IS``, PostgreSQL's ``IS NOT DISTINCT FROM``)."""
    return f"""
UPDATE tasks SET status = :status,
       scheduled_for = coalesce(CAST(:retry_at AS bigint), scheduled_for),
       completed_at = CASE WHEN CAST(:status AS text) IN ('completed', 'failed', 'canceled')
                           THEN CAST(:now AS bigint) END,
       attempt_count = attempt_count - :give_back,
       review = CASE WHEN CAST(:review AS integer) = 1 THEN 'pending' ELSE review END,
       approval = CASE WHEN CAST(:approval AS integer) = 1 THEN 'pending' ELSE approval END,
       result_summary = coalesce(CAST(:summary AS text), result_summary),
       result_detail = CASE WHEN CAST(:summary AS text) IS NULL AND CAST(:detail AS text) IS NULL
                            THEN result_detail ELSE CAST(:detail AS text) END,
       cost_usd = cost_usd + :cost_usd, api_cost_usd = api_cost_usd + :api_cost_usd,
       tokens_in = tokens_in + :tokens_in, tokens_out = tokens_out + :tokens_out,
       denials = denials + :denials, model = coalesce(:model, model),
       claimed_by = NULL, lease_until = NULL, updated_at = :now, updated_by = 'dispatcher'
WHERE id = :task_id AND status = 'active' AND {worker_matches}
RETURNING *
"""


def sensor_run_sql(state: str) -> str:
    """``SQL_RECORD_SENSOR_RUN``: a sensor's run upserted into its row; ``state`` is
    the :state parameter as the backend's JSON column takes it (NULL keeps the
    saved state)."""
    return f"""
INSERT INTO sensor_state (name, last_run_at, last_duration_ms, last_status, last_error,
                          consecutive_failures, created_last, ignored_last, dropped_last,
                          rejected_last, next_due_at, state)
VALUES (:name, :started_at, :duration_ms, :status, :error, :failures, :created, :ignored,
        :dropped, :rejected, :next_due_at, coalesce({state}, '{{}}'))
ON CONFLICT (name) DO UPDATE SET
    last_run_at = excluded.last_run_at, last_duration_ms = excluded.last_duration_ms,
    last_status = excluded.last_status, last_error = excluded.last_error,
    consecutive_failures = excluded.consecutive_failures, created_last = excluded.created_last,
    ignored_last = excluded.ignored_last, dropped_last = excluded.dropped_last,
    rejected_last = excluded.rejected_last,
    next_due_at = excluded.next_due_at, state = coalesce({state}, sensor_state.state)
"""


def sensor_skips_sql(skips: str) -> str:
    """``SQL_SET_SENSOR_SKIPS``: a sensor's skipped runs written into its row;
    ``skips`` is the :skips parameter as the backend's JSON column takes it."""
    return f"""
INSERT INTO sensor_state (name, skips) VALUES (:name, {skips})
ON CONFLICT (name) DO UPDATE SET skips = excluded.skips
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
WHERE id = :id AND status IN ('pending', 'blocked', 'waiting', 'active') RETURNING *
"""

SQL_SET_PRIORITY = """
UPDATE tasks SET priority = :priority, updated_at = :now, updated_by = :actor
WHERE id = :id AND status IN ('pending', 'blocked', 'waiting') RETURNING *
"""

SQL_DEFER = """
UPDATE tasks SET scheduled_for = :until, updated_at = :now, updated_by = :actor
WHERE id = :id AND status IN ('pending', 'blocked') RETURNING *
"""

# Later by :by ms than it is due now (or than now, for a task already due).
SQL_DEFER_BY = """
UPDATE tasks SET scheduled_for = CASE WHEN scheduled_for > :now THEN scheduled_for ELSE :now END + :by,
       updated_at = :now, updated_by = :actor
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
WHERE id = :id AND status IN ('pending', 'active', 'blocked', 'waiting') RETURNING *
"""

# The running task's agent asks a person a question: stored on the task with the
# run that asked (its open run), the last answer cleared. The task stays active
# until its run is recorded (as ``asked``: ``vigil.fate``), then waits.
SQL_ASK = """
UPDATE tasks SET question = :question, choices = :choices, answer = NULL,
       asked_run = (SELECT max(r.id) FROM runs AS r WHERE r.task_id = :id AND r.finished_at IS NULL),
       updated_at = :now, updated_by = :actor
WHERE id = :id AND status = 'active' AND cancel_requested = 0 RETURNING *
"""

# A person's answer: the task is due at once, its attempt count kept (the note with
# the answer is written in the same transaction).
SQL_ANSWER = """
UPDATE tasks SET status = 'pending', answer = :answer, scheduled_for = :now, updated_at = :now,
       updated_by = :actor
WHERE id = :id AND status = 'waiting' RETURNING *
"""

# A blocked task back in the queue, due at once, its attempt count kept; not one
# awaiting a person's approval or review (``approve`` / ``reject`` decide those).
SQL_UNBLOCK = """
UPDATE tasks SET status = 'pending', scheduled_for = :now, completed_at = NULL, updated_at = :now,
       updated_by = :actor
WHERE id = :id AND status = 'blocked' AND coalesce(approval, '') <> 'pending' AND coalesce(review, '') <> 'pending'
RETURNING *
"""

# Whether a person made the task (``tasks``) as urgent as it is: the last audit row
# that set its priority (its creation, a change) was a person's ("human", "human via
# telegram …", "human (browser session …)"), or, its audit rows pruned, a person added
# it. Over the daily budget only such tasks are claimed (``vigil.budget.exempt``).
PERSON_SET_PRIORITY = """coalesce(
    (SELECT substr(e.actor, 1, 5) FROM task_events AS e WHERE e.task_id = tasks.id AND e.kind IN ('created', 'priority')
     ORDER BY e.id DESC LIMIT 1),
    CASE WHEN tasks.source = 'human' THEN 'human' END) = 'human'"""

# Only an open run: a claim replayed after its run was recorded (or recovered) must
# not overwrite that record, count its costs twice or touch the next attempt. A
# summary the agent gave it (SQL_CLOSE_RUN) is kept.
SQL_RECORD_RUN = """
UPDATE runs SET finished_at = :now, outcome = :outcome, error = :error, exit_code = :exit_code,
       cost_usd = :cost_usd, api_cost_usd = :api_cost_usd, tokens_in = :tokens_in,
       tokens_out = :tokens_out, cache_read_tokens = :cache_read_tokens,
       cache_write_tokens = :cache_write_tokens, model = :model, session_id = :session_id,
       transcript_path = :transcript_path, permission_denials = :permission_denials,
       summary = coalesce(summary, :summary), account = :account, checks = :checks, changes = :changes,
       resumed_from = :resumed_from, priced_by = :priced_by
WHERE id = :run_id AND finished_at IS NULL
"""

# What the agent closed its task as, on the run it did it from (the run's own
# summary is then the agent's): only while that run is open and belongs to the task.
SQL_CLOSE_RUN = """
UPDATE runs SET agent_status = :status, summary = :summary
WHERE id = :run_id AND task_id = :id AND finished_at IS NULL
"""

SQL_ADD_COSTS = """
UPDATE tasks SET cost_usd = cost_usd + :cost_usd, api_cost_usd = api_cost_usd + :api_cost_usd,
       tokens_in = tokens_in + :tokens_in, tokens_out = tokens_out + :tokens_out,
       denials = denials + :denials, model = coalesce(:model, model), updated_at = :now
WHERE id = :task_id
"""

# A task its agent closed during the run (or that another holds now): only the claim
# is let go; its status stays.
SQL_RELEASE_CLOSED = """
UPDATE tasks SET claimed_by = NULL, lease_until = NULL WHERE id = :task_id AND claimed_by = :worker
"""

# A task its agent closed as completed during a run whose sandbox could not start
# its commands: the close is void (its work was not done), so the task is active
# under its claim again, to be settled like any failed attempt (``vigil.fate``).
SQL_REOPEN_AGENT_CLOSED = """
UPDATE tasks SET status = 'active', completed_at = NULL, updated_at = :now, updated_by = 'dispatcher'
WHERE id = :task_id AND status = 'completed' AND claimed_by = :worker
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

# A reviewed result accepted: the task is done; a worktree's merge, when there was
# one, recorded with it (:worktree NULL keeps what is there).
SQL_APPROVE_REVIEW = """
UPDATE tasks SET status = 'completed', review = 'approved', completed_at = :now, updated_at = :now,
       updated_by = :actor, worktree = coalesce(CAST(:worktree AS text), worktree)
WHERE id = :id AND status = 'blocked' AND review = 'pending'
RETURNING *
"""

# An audit row written by a behaviour rather than a trigger (a merge: the branch it
# merged, the commit the base then pointed to, how).
SQL_ADD_EVENT = """
INSERT INTO task_events (task_id, at, actor, kind, from_value, to_value, detail)
VALUES (:id, :now, :actor, :kind, :from_value, :to_value, :detail)
"""

# A reviewed result refused: back to the queue at once (the reason is a note, written
# in the same transaction), its attempt count kept.
SQL_REJECT_REVIEW = """
UPDATE tasks SET status = 'pending', review = 'rejected', scheduled_for = :now, updated_at = :now,
       updated_by = :actor
WHERE id = :id AND status = 'blocked' AND review = 'pending'
RETURNING *
"""

# A completed task whose pull request came back (changes requested, checks failed):
# back to the queue at once like a rejected review, the merge its approval recorded
# replaced by :worktree (merged cleared), its attempt count kept.
SQL_SEND_BACK = """
UPDATE tasks SET status = 'pending', review = 'rejected', scheduled_for = :now, completed_at = NULL,
       worktree = CAST(:worktree AS text), updated_at = :now, updated_by = :actor
WHERE id = :id AND status = 'completed'
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

# The claim's own run is still open: a stale claim (the same worker already on the
# next attempt) must not put that attempt back.
SQL_CLAIM_RUN_OPEN = "SELECT 1 FROM runs WHERE id = :run_id AND task_id = :task_id AND finished_at IS NULL"


# --- retention (``tx.q.prune``: ``sqlite_retention``, ``postgres_retention``) ------

SQL_PRUNE_WALK = "SELECT id, created_at FROM tasks WHERE id > :after ORDER BY id LIMIT :limit"

SQL_EVENTS_WALK = "SELECT id, at FROM task_events WHERE id > :after ORDER BY id LIMIT :limit"

# The primary key of ``cost_archive``, and every column of a row.
ARCHIVE_KEY = "start_ms, span_ms, skills, source, model, sensor, account"
ARCHIVE_COLUMNS = f"""{ARCHIVE_KEY}, runs, tasks_last, tasks_hour, tasks_day, tasks_model, tasks_account,
    cost_usd, api_cost_usd, tokens_in, tokens_out, cache_read_tokens, cache_write_tokens"""

# A run's key in the account roll-up, live and archived: "executor:account", or
# "(none)" when either is missing (``r`` is the run).
RUN_ACCOUNT = "coalesce(r.executor || ':' || r.account, '(none)')"


def origin_chain(roots: str) -> str:
    """The CTEs ``chain`` and ``origin(task_id, sensor)`` (after ``WITH RECURSIVE``):
    for each task ``roots`` selects (``id, parent_id, source`` of ``tasks t``), the
    sensor at the root of its parent chain ("feeds" for a follow-up of a follow-up
    of a ``sensor:feeds`` task; ``(none)`` when the root is not a sensor's)."""
    return f"""chain(task_id, parent_id, source) AS (
    {roots}
    UNION ALL
    SELECT c.task_id, p.parent_id, p.source FROM chain c JOIN tasks p ON p.id = c.parent_id
),
origin(task_id, sensor) AS (
    SELECT task_id, CASE WHEN source LIKE 'sensor:%' THEN substr(source, 8) ELSE '(none)' END
    FROM chain WHERE parent_id IS NULL
)"""


# The runs to archive with five flags that mark one run per task and grouping (its
# last run overall, in its hour, in its UTC day, with its model, with its account),
# so that a roll-up counts each task once per group (schema V2; the account's since
# SQLite V7, PostgreSQL V9). Each backend's ``SQL_ARCHIVE_RUNS`` defines ``origin``
# (``origin_chain``) and adds the WHERE that picks the doomed tasks' finished runs.
ARCHIVE_FLAGGED = f"""
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
ARCHIVE_ADD = """
    runs = a.runs + excluded.runs, tasks_last = a.tasks_last + excluded.tasks_last,
    tasks_hour = a.tasks_hour + excluded.tasks_hour, tasks_day = a.tasks_day + excluded.tasks_day,
    tasks_model = a.tasks_model + excluded.tasks_model, tasks_account = a.tasks_account + excluded.tasks_account,
    cost_usd = a.cost_usd + excluded.cost_usd,
    api_cost_usd = a.api_cost_usd + excluded.api_cost_usd, tokens_in = a.tokens_in + excluded.tokens_in,
    tokens_out = a.tokens_out + excluded.tokens_out,
    cache_read_tokens = a.cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = a.cache_write_tokens + excluded.cache_write_tokens
"""

# Rows that ended at or before :before (no row starts less than an hour before its end).
SQL_DROP_COSTS = f"""
DELETE FROM cost_archive WHERE ({ARCHIVE_KEY}) IN (
    SELECT {ARCHIVE_KEY} FROM cost_archive WHERE start_ms <= :before - 3600000 AND start_ms + span_ms <= :before
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


# --- flood limits and requested retries ---------------------------------------------
# A parameter PostgreSQL cannot type from its place (a bare SELECT value, an operand of
# ``||``, a CASE branch with no typed sibling) is CAST, which SQLite reads the same way.

# Depth the new task would have: 1 for a child of a root task, one more per ancestor.
# Stops one step past :max_depth, which is all the limit needs to know.
SQL_FOLLOW_UP_DEPTH = """
WITH RECURSIVE chain(id, depth) AS (
    SELECT CAST(:parent_id AS bigint), 1
    UNION ALL
    SELECT t.parent_id, c.depth + 1 FROM tasks t JOIN chain c ON t.id = c.id
    WHERE t.parent_id IS NOT NULL AND c.depth <= :max_depth
)
SELECT max(depth) AS depth FROM chain
"""

# Both counts stop at :cap rows (ix_tasks_parent, ix_tasks_source_created).
SQL_COUNT_CHILDREN = "SELECT count(*) AS n FROM (SELECT 1 FROM tasks WHERE parent_id = :parent_id LIMIT :cap) AS x"
SQL_COUNT_SOURCE_SINCE = """
SELECT count(*) AS n FROM (SELECT 1 FROM tasks WHERE source = :source AND created_at > :since LIMIT :cap) AS x
"""

# An active task asks for a later retry (Store.request_retry). With no retry left it
# fails for good, as the dispatcher's own retries do; a requested cancel wins (the
# row does not match, and the dispatcher ends the run).
# The agent asked for another try: its fate (``vigil.fate.after_request``) written
# while the run goes on, the claim kept so that no other lane starts the task before
# this run is recorded.
SQL_REQUEST_RETRY = """
UPDATE tasks SET status = :status, scheduled_for = coalesce(CAST(:retry_at AS bigint), scheduled_for),
       completed_at = CASE WHEN CAST(:status AS text) = 'failed' THEN CAST(:now AS bigint) END,
       result_summary = :summary, updated_at = CAST(:now AS bigint), updated_by = :actor
WHERE id = :id AND status = 'active' AND cancel_requested = 0
RETURNING *
"""


# --- cost reports (``sqlite_costs``, ``postgres_costs``) -----------------------------

# Pruned tasks' spend is in the archive, by hour or folded day (one counts whole, as
# in the roll-ups: for a budget that errs on the side of spend).
SQL_SPEND_SINCE = """
SELECT CAST((SELECT coalesce(sum(cost_usd), 0) FROM runs WHERE finished_at >= :since)
            + (SELECT coalesce(sum(cost_usd), 0) FROM cost_archive
               WHERE start_ms > :since - 86400000 AND start_ms + span_ms > :since) AS double precision) AS spent
"""


def cost_rollup(
    live: tuple[str, str], archived: tuple[str, str, str], *, by_time: bool, with_sql: str = "", collate: str = ""
) -> str:
    """One ``SQL_COST_ROLLUP`` statement from a backend's pieces: ``live`` is the key
    expression over the runs and their FROM (``r`` is the run), ``archived`` the key
    expression over ``cost_archive a``, its task-count column and any joins;
    ``with_sql`` a WITH clause the live FROM uses; ``collate`` the sort order of keys.

    Live and archived runs are summed per key (a task is either live or archived:
    prune takes all its runs, so adding the two task counts is exact). An archived
    hour, or a folded day, counts whole when :since falls inside it (no archive row
    starts more than a day before the runs it may count). Newest key first by time,
    else the dearest first."""
    live_key, live_from = live
    archived_key, tasks, joins = archived
    order = f"key{collate} DESC" if by_time else f"cost_usd DESC, key{collate}"
    # GROUP BY 1, not key: SQLite's json_each (the skills) has a column of that name.
    return f"""{with_sql}
SELECT key, CAST(sum(runs) AS bigint) AS runs, CAST(sum(tasks) AS bigint) AS tasks,
       CAST(coalesce(sum(cost_usd), 0) AS double precision) AS cost_usd,
       CAST(coalesce(sum(api_cost_usd), 0) AS double precision) AS api_cost_usd,
       CAST(coalesce(sum(tokens_in), 0) AS bigint) AS tokens_in,
       CAST(coalesce(sum(tokens_out), 0) AS bigint) AS tokens_out,
       CAST(coalesce(sum(cache_read_tokens), 0) AS bigint) AS cache_read_tokens,
       CAST(coalesce(sum(cache_write_tokens), 0) AS bigint) AS cache_write_tokens
FROM (
    SELECT {live_key} AS key, count(*) AS runs, count(DISTINCT r.task_id) AS tasks,
           sum(r.cost_usd) AS cost_usd, sum(r.api_cost_usd) AS api_cost_usd,
           sum(r.tokens_in) AS tokens_in, sum(r.tokens_out) AS tokens_out,
           sum(r.cache_read_tokens) AS cache_read_tokens, sum(r.cache_write_tokens) AS cache_write_tokens
    FROM {live_from} WHERE r.finished_at >= :since GROUP BY 1
    UNION ALL
    SELECT {archived_key} AS key, sum(a.runs) AS runs, sum(a.{tasks}) AS tasks,
           sum(a.cost_usd) AS cost_usd, sum(a.api_cost_usd) AS api_cost_usd,
           sum(a.tokens_in) AS tokens_in, sum(a.tokens_out) AS tokens_out,
           sum(a.cache_read_tokens) AS cache_read_tokens, sum(a.cache_write_tokens) AS cache_write_tokens
    FROM cost_archive a {joins}
    WHERE a.start_ms > :since - 86400000 AND a.start_ms + a.span_ms > :since GROUP BY 1
) AS u
GROUP BY key ORDER BY {order}"""
