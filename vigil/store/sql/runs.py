"""The SQL of the dispatcher's side: claiming a task and opening its run, the run's
process, lease and executor, recording the run and settling the task's fate, and
crash recovery's reads. Each backend's engine runs ``CLAIM`` (and on SQLite
``OPEN_RUN`` after it) in its ``claim``.

Parameters are ``:name`` on both backends (``vigil.store.transaction.Sql``); ``now``
is the store clock's epoch ms.
"""

from __future__ import annotations

from vigil.models import MAX_PRIORITY, MIN_PRIORITY
from vigil.store.transaction import Sql

_PRIORITIES = range(MIN_PRIORITY, MAX_PRIORITY + 1)

# Whether a person made the task (``tasks``) as urgent as it is: the last audit row
# that set its priority (its creation, a change) was a person's ("human", "human via
# telegram …", "human (browser session …)"), or, its audit rows pruned, a person added
# it. Over the daily budget only such tasks are claimed (``vigil.budget.exempt``).
PERSON_SET_PRIORITY = """coalesce(
    (SELECT substr(e.actor, 1, 5) FROM task_events AS e WHERE e.task_id = tasks.id AND e.kind IN ('created', 'priority')
     ORDER BY e.id DESC LIMIT 1),
    CASE WHEN tasks.source = 'human' THEN 'human' END) = 'human'"""


def _next_due_id_sqlite(max_priority: str, anyone: str = ":anyone") -> str:
    """The most urgent due task's id on SQLite. ``priority IN (1, …, 9)`` makes the
    planner seek ix_tasks_claim once per priority, in order, each seek bounded by
    ``scheduled_for <= :now``: neither finished tasks nor many not-yet-due urgent
    tasks are walked, nothing is sorted, and LIMIT 1 ends the walk at the first due
    task. Only priorities up to ``max_priority`` (a parameter, or a number) take
    part (the budget's urgency gate); its unary ``+`` keeps that bound a filter, not the index range the
    planner would otherwise pick instead of the seeks; with ``:anyone`` false, only
    tasks a person made that urgent (``PERSON_SET_PRIORITY``, looked up for the few
    urgent candidates only). A pending task still claimed
    is one whose run asked for a retry and has not been recorded yet: no second run
    of it starts until that one has ended."""
    priorities = ", ".join(str(p) for p in _PRIORITIES)
    return f"""SELECT id FROM tasks
        WHERE status = 'pending' AND waiting_on = 0 AND priority IN ({priorities}) AND scheduled_for <= :now
          AND claimed_by IS NULL AND +priority <= {max_priority} AND ({anyone} OR {PERSON_SET_PRIORITY})
        ORDER BY priority, scheduled_for, id LIMIT 1"""


# PostgreSQL: one index seek (ix_tasks_claim) per priority level, most urgent level
# first, stopping at the first level that has a due task; so neither finished tasks
# nor many not-yet-due urgent tasks are walked, and nothing is sorted. SKIP LOCKED
# passes over a task another dispatcher is claiming right now; the outer
# ``status = 'pending'`` re-check is what makes a claim exclusive. A pending task
# still claimed is one whose run asked for a retry and has not been recorded yet: no
# second run of it starts until that one has ended.
_NEXT_DUE_ID_POSTGRES = f"""
SELECT c.id FROM generate_series(1, :max_priority::int) AS p (priority)
CROSS JOIN LATERAL (
    SELECT id FROM tasks
    WHERE status = 'pending' AND waiting_on = 0 AND priority = p.priority AND scheduled_for <= :now
      AND claimed_by IS NULL AND (:anyone::boolean OR {PERSON_SET_PRIORITY})
    ORDER BY scheduled_for, id LIMIT 1
    FOR UPDATE SKIP LOCKED
) AS c
LIMIT 1
"""

# The claim. SQLite: the task (its run is opened by OPEN_RUN, in the same BEGIN
# IMMEDIATE transaction). PostgreSQL: the task and its run in one statement (its own
# transaction when run alone), the run's id and attempt as run_id / run_attempt; the
# audit event comes from the status trigger.
CLAIM = Sql(
    sqlite=f"""
UPDATE tasks SET status = 'active', claimed_by = :worker, lease_until = :lease_until,
       started_at = :now, updated_at = :now, updated_by = 'dispatcher',
       attempt_count = attempt_count + 1, cancel_requested = 0,
       executor = coalesce(:executor, executor)
WHERE id = ({_next_due_id_sqlite(":max_priority")})
RETURNING *
""",
    postgres=f"""
WITH claimed AS (
    UPDATE tasks SET status = 'active', claimed_by = :worker, lease_until = :lease_until,
           started_at = :now, updated_at = :now, updated_by = 'dispatcher',
           attempt_count = attempt_count + 1, cancel_requested = 0,
           executor = coalesce(:executor, executor)
    WHERE id = ({_NEXT_DUE_ID_POSTGRES}) AND status = 'pending'
    RETURNING *
), run AS (
    INSERT INTO runs (task_id, attempt, started_at, executor, claimed_by)
    SELECT id, (SELECT count(*) + 1 FROM runs WHERE task_id = claimed.id), :now, :executor, :worker
    FROM claimed
    RETURNING id, attempt
)
SELECT claimed.*, run.id AS run_id, run.attempt AS run_attempt
FROM claimed, run
""",
)

OPEN_RUN = Sql(
    sqlite="""
INSERT INTO runs (task_id, attempt, started_at, executor, claimed_by)
VALUES (:task_id, (SELECT count(*) + 1 FROM runs WHERE task_id = :task_id), :now, :executor, :worker)
RETURNING id, attempt
""",
    postgres=None,  # CLAIM opened it
)

# The task the dispatcher takes next (the queue's marker): the claim's own search,
# unlocked.
NEXT_DUE_ID = Sql(
    sqlite=_next_due_id_sqlite(str(MAX_PRIORITY), "1"),
    postgres="""
SELECT c.id FROM generate_series(1, 9) AS p (priority)
CROSS JOIN LATERAL (
    SELECT id FROM tasks
    WHERE status = 'pending' AND waiting_on = 0 AND priority = p.priority AND scheduled_for <= :now
      AND claimed_by IS NULL
    ORDER BY scheduled_for, id LIMIT 1
) AS c
LIMIT 1
""",
)

# The earliest any claimable task (pending, waiting on nothing) is due: one bounded
# seek of ix_tasks_claim per priority (a plain min() would walk every pending task
# through ix_tasks_status_id).
NEXT_DUE_AT = Sql(
    sqlite=(
        "SELECT min(m) AS m FROM ("
        + " UNION ALL ".join(
            "SELECT min(scheduled_for) AS m FROM tasks"
            f" WHERE status = 'pending' AND waiting_on = 0 AND priority = {p} AND claimed_by IS NULL"
            for p in _PRIORITIES
        )
        + ")"
    ),
    postgres="""
SELECT min(x.scheduled_for) AS m FROM generate_series(1, 9) AS p (priority)
CROSS JOIN LATERAL (
    SELECT scheduled_for FROM tasks
    WHERE status = 'pending' AND waiting_on = 0 AND priority = p.priority AND claimed_by IS NULL
    ORDER BY scheduled_for LIMIT 1
) AS x
""",
)

ACTIVE_TASKS = Sql("SELECT * FROM tasks WHERE status = 'active' ORDER BY id")

GET_RUN = Sql("SELECT * FROM runs WHERE id = :id")
# Locked on PostgreSQL: two dispatchers recovering the same dead run settle it once.
# SQLite's writers are serialised by BEGIN IMMEDIATE: no row lock to take.
GET_RUN_FOR_UPDATE = Sql(
    sqlite="SELECT * FROM runs WHERE id = :id",
    postgres="SELECT * FROM runs WHERE id = :id FOR UPDATE",
)

LIST_RUNS = Sql("SELECT * FROM runs WHERE task_id = :id ORDER BY attempt")

# SQLite's ``+id``: ordering by the bare rowid makes SQLite walk every run in id
# order instead of the few rows of the partial index ix_runs_open (a full scan of
# the history).
OPEN_RUNS = Sql(
    sqlite="SELECT * FROM runs WHERE finished_at IS NULL ORDER BY +id",
    postgres="SELECT * FROM runs WHERE finished_at IS NULL ORDER BY id",
)

SET_RUN_PROCESS = Sql("""
UPDATE runs SET pid = :pid, pgid = :pgid, proc_start = :proc_start, workspace = :workspace, gated = :gated
WHERE id = :id
""")

# The worktree Vigil made (or made again) for a task, before its agent starts.
SET_WORKTREE = Sql("UPDATE tasks SET worktree = :worktree WHERE id = :id RETURNING *")
SET_GITHUB = Sql("UPDATE tasks SET github = :github WHERE id = :id RETURNING *")

# The executor a skill chose, on the run and on the task while it is still active.
SET_RUN_EXECUTOR = Sql("UPDATE runs SET executor = :executor WHERE id = :run_id")
SET_TASK_EXECUTOR = Sql("UPDATE tasks SET executor = :executor WHERE id = :task_id AND status = 'active'")

RENEW_LEASE = Sql("""
UPDATE tasks SET lease_until = :lease_until WHERE id = :id AND claimed_by = :worker RETURNING cancel_requested
""")

# Only an open run: a claim replayed after its run was recorded (or recovered) must
# not overwrite that record, count its costs twice or touch the next attempt. A
# summary the agent gave it (CLOSE_RUN) is kept.
RECORD_RUN = Sql("""
UPDATE runs SET finished_at = :now, outcome = :outcome, error = :error, exit_code = :exit_code,
       cost_usd = :cost_usd, api_cost_usd = :api_cost_usd, tokens_in = :tokens_in,
       tokens_out = :tokens_out, cache_read_tokens = :cache_read_tokens,
       cache_write_tokens = :cache_write_tokens, model = :model, session_id = :session_id,
       transcript_path = :transcript_path, permission_denials = :permission_denials,
       summary = coalesce(summary, :summary), account = :account, checks = :checks, changes = :changes,
       resumed_from = :resumed_from, priced_by = :priced_by
WHERE id = :run_id AND finished_at IS NULL
""")

# What the agent closed its task as, on the run it did it from (the run's own
# summary is then the agent's): only while that run is open and belongs to the task.
CLOSE_RUN = Sql("""
UPDATE runs SET agent_status = :status, summary = :summary
WHERE id = :run_id AND task_id = :id AND finished_at IS NULL
""")

ADD_COSTS = Sql("""
UPDATE tasks SET cost_usd = cost_usd + :cost_usd, api_cost_usd = api_cost_usd + :api_cost_usd,
       tokens_in = tokens_in + :tokens_in, tokens_out = tokens_out + :tokens_out,
       denials = denials + :denials, model = coalesce(:model, model), updated_at = :now
WHERE id = :task_id
""")

# A task its agent closed during the run (or that another holds now): only the claim
# is let go; its status stays.
RELEASE_CLOSED = Sql("""
UPDATE tasks SET claimed_by = NULL, lease_until = NULL WHERE id = :task_id AND claimed_by = :worker
""")

# A task its agent closed as completed during a run whose sandbox could not start
# its commands: the close is void (its work was not done), so the task is active
# under its claim again, to be settled like any failed attempt (``vigil.fate``).
REOPEN_AGENT_CLOSED = Sql("""
UPDATE tasks SET status = 'active', completed_at = NULL, updated_at = :now, updated_by = 'dispatcher'
WHERE id = :task_id AND status = 'completed' AND claimed_by = :worker
""")

# A claimed task whose skill needs approval goes back unrun: its run row is removed
# and its attempt given back, so the approval wait costs it nothing.
DROP_OPEN_RUN = Sql("DELETE FROM runs WHERE id = :run_id AND task_id = :task_id AND finished_at IS NULL")

# The claim's own run is still open: a stale claim (the same worker already on the
# next attempt) must not put that attempt back.
CLAIM_RUN_OPEN = Sql("SELECT 1 FROM runs WHERE id = :run_id AND task_id = :task_id AND finished_at IS NULL")

# The source of the root of a task's parent chain ("sensor:feeds" for a follow-up of
# a follow-up of a feeds task); the chain is short, one primary-key seek per step.
ORIGIN_OF = Sql("""
WITH RECURSIVE up(id, parent_id, source, depth) AS (
    SELECT id, parent_id, source, 0 FROM tasks WHERE id = :id
    UNION ALL
    SELECT t.id, t.parent_id, t.source, up.depth + 1 FROM tasks t JOIN up ON t.id = up.parent_id
)
SELECT source FROM up ORDER BY depth DESC LIMIT 1
""")


def _settle(worker_matches: str) -> str:
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


# A task's fate (``vigil.fate.Fate``: :status, :retry_at NULL to keep the due time,
# :give_back 1 to give the attempt back, :summary and :detail both NULL to keep them
# (either given: both are this run's, so a later run's summary never sits beside an
# earlier run's detail), :review / :approval 1 to set that state pending) and its
# run's costs (:cost_usd … :denials; zeros for a task put back unrun), releasing the
# claim; only while the task is active under :worker, so a claim that lost the task
# (to crash recovery, or its agent closed it) writes nothing. :worker NULL matches a
# NULL claim (SQLite's ``IS``, PostgreSQL's ``IS NOT DISTINCT FROM``).
SETTLE = Sql(
    sqlite=_settle("claimed_by IS :worker"),
    postgres=_settle("claimed_by IS NOT DISTINCT FROM :worker::text"),
)
