"""The SQL of tasks: adding them (dedup, flood limits), the conditional writes of
people, scripts and the agent, and the reads of a task and its history (notes,
events, dependencies). ``runs`` holds the dispatcher's statements.

Parameters are ``:name`` on both backends (``vigil.store.transaction.Sql``); ``now``
is the store clock's epoch ms. A parameter PostgreSQL cannot type from its place (a
bare SELECT value, an operand of ``||``, a CASE branch with no typed sibling) is
CAST, which SQLite reads the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Collection

from vigil.models import TaskStatus
from vigil.store.transaction import Sql

GET_TASK = Sql("SELECT * FROM tasks WHERE id = :id")
# Locked on PostgreSQL; SQLite's writers are serialised by BEGIN IMMEDIATE already.
TASK_FOR_UPDATE = Sql(
    sqlite="SELECT * FROM tasks WHERE id = :id",
    postgres="SELECT * FROM tasks WHERE id = :id FOR UPDATE",
)

# A new task, deduplicated in the insert itself: an ``open`` key conflicts through
# ux_tasks_open_key, an ``ever`` key through ux_tasks_ever_key or the NOT EXISTS over
# every earlier row or the keys of pruned tasks (retired_keys). DO NOTHING has no
# target on purpose: those indexes are the only unique constraints a new row can
# meet, and NOT NULL / CHECK failures still raise.
_ADD_TASK_COLUMNS = """
INSERT INTO tasks (subject, description, skills, priority, source, source_key, dedup,
                   parent_id, scheduled_for, created_at, updated_at, updated_by, max_retries,
                   status, approval, model, workdir, max_cost_usd, code, github)"""

# The new row's values. A follow-up without a workdir or code options of its own
# works where its parent does, as its parent does. PostgreSQL's are cast: in INSERT …
# SELECT an untyped parameter would otherwise be taken as text.
_VALUES_SQLITE = """:subject, :description, :skills, :priority, :source, :source_key, :dedup, :parent_id,
       :scheduled_for, :now, :now, :actor, :max_retries,
       CASE WHEN :approval THEN 'blocked' ELSE 'pending' END, CASE WHEN :approval THEN 'pending' END,
       :model, coalesce(:workdir, (SELECT p.workdir FROM tasks AS p WHERE p.id = :parent_id)), :max_cost_usd,
       coalesce(:code, (SELECT p.code FROM tasks AS p WHERE p.id = :parent_id)), :github"""
_VALUES_POSTGRES = """:subject::text, :description::text, :skills::jsonb, :priority::int,
       :source::text, :source_key::text, :dedup::text, :parent_id::bigint,
       :scheduled_for::bigint, :now::bigint, :now::bigint, :actor::text, :max_retries::int,
       CASE WHEN :approval::bool THEN 'blocked' ELSE 'pending' END,
       CASE WHEN :approval::bool THEN 'pending' END, :model::text,
       coalesce(:workdir::text, (SELECT p.workdir FROM tasks AS p WHERE p.id = :parent_id::bigint)),
       :max_cost_usd::double precision,
       coalesce(:code::text, (SELECT p.code FROM tasks AS p WHERE p.id = :parent_id::bigint)), :github::text"""


def _add_task(values: str, *, ever: bool) -> str:
    """The insert around a backend's ``values``. The ``open`` scope, by far the
    common one, needs no NOT EXISTS, so it is a plain VALUES insert."""
    if not ever:
        return f"""{_ADD_TASK_COLUMNS}
VALUES ({values})
ON CONFLICT DO NOTHING
RETURNING id
"""
    return f"""{_ADD_TASK_COLUMNS}
SELECT {values}
WHERE NOT EXISTS (SELECT 1 FROM tasks WHERE source_key = :source_key)
  AND NOT EXISTS (SELECT 1 FROM retired_keys WHERE source_key = :source_key)
ON CONFLICT DO NOTHING
RETURNING id
"""


ADD_TASK = Sql(sqlite=_add_task(_VALUES_SQLITE, ever=False), postgres=_add_task(_VALUES_POSTGRES, ever=False))
ADD_TASK_EVER = Sql(sqlite=_add_task(_VALUES_SQLITE, ever=True), postgres=_add_task(_VALUES_POSTGRES, ever=True))

ADD_DEP = Sql("INSERT INTO task_deps (task_id, depends_on) VALUES (:task_id, :depends_on) ON CONFLICT DO NOTHING")

# The task a dedup hit names: the open holder (ux_tasks_open_key), else the newest
# task that used the key (ix_tasks_key, already in id order). One row; its id is NULL
# when no task has the key. Never a sort: a sensor that reuses one key every run has
# thousands of finished tasks behind it.
HOLDER_OF_KEY = Sql("""
SELECT coalesce(
    (SELECT id FROM tasks WHERE source_key = :key AND status IN ('pending', 'active', 'blocked', 'waiting')),
    (SELECT id FROM tasks WHERE source_key = :key ORDER BY id DESC LIMIT 1)
) AS id
""")

# A task a flood limit refuses, if its key deduplicates it, is "already there", not
# refused: ``insert_one`` finds out by inserting it and undoing that.
SAVEPOINT = Sql("SAVEPOINT flood_check")
ROLLBACK_TO_SAVEPOINT = Sql("ROLLBACK TO SAVEPOINT flood_check")
RELEASE_SAVEPOINT = Sql("RELEASE SAVEPOINT flood_check")

# --- reads ------------------------------------------------------------------------

LIST_EVENTS = Sql("SELECT * FROM task_events WHERE task_id = :id ORDER BY id")

LIST_NOTES = Sql("SELECT * FROM notes WHERE task_id = :id ORDER BY id")

DEPENDENCIES = Sql("SELECT depends_on FROM task_deps WHERE task_id = :id ORDER BY depends_on")

# Kept by triggers in the same transaction as every status change: no count(*).
COUNT_BY_STATUS = Sql("SELECT status, n FROM status_counts")

# What waits for a person, and the runs since :since whose agent was refused something.
ATTENTION = Sql("""
SELECT (SELECT count(*) FROM tasks WHERE status = 'blocked' AND review = 'pending') AS awaiting_review,
       (SELECT count(*) FROM tasks WHERE status = 'blocked' AND approval = 'pending') AS awaiting_approval,
       (SELECT count(*) FROM runs WHERE finished_at >= :since AND permission_denials IS NOT NULL) AS denied_runs
""")

# The event stream (Store.events_after): a walk up the primary key from :after, the
# filters applied on the way; :kinds is a JSON array on SQLite, an array on
# PostgreSQL (NULL: every kind).
EVENTS_AFTER = Sql(
    sqlite="""
SELECT * FROM task_events
WHERE id > :after AND (:since IS NULL OR at >= :since) AND (:task IS NULL OR task_id = :task)
  AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
ORDER BY id LIMIT :limit
""",
    postgres="""
SELECT * FROM task_events
WHERE id > :after::bigint AND (:since::bigint IS NULL OR at >= :since::bigint)
  AND (:task::bigint IS NULL OR task_id = :task::bigint)
  AND (:kinds::text[] IS NULL OR kind = ANY(:kinds::text[]))
ORDER BY id LIMIT :limit
""",
)


def _literals(statuses: tuple[TaskStatus, ...]) -> str:
    """Statuses as SQL literals (each a ``TaskStatus``, so safe)."""
    return ",".join(f"'{s.value}'" for s in statuses)


def _statuses(statuses: Collection[TaskStatus]) -> tuple[TaskStatus, ...]:
    return tuple(sorted({TaskStatus(s) for s in statuses}))


def list_tasks(statuses: Collection[TaskStatus]) -> Sql:
    """Tasks of ``statuses`` newest first, keyset-paged (``before_id``, ``limit``).

    SQLite: ix_tasks_status_id walks each status down from :before_id, and stops
    each walk after :limit rows, so a million finished tasks are never sorted.
    PostgreSQL: one backward walk per status, each stopping after :limit rows; the
    statuses are literals so the planner sees how rare each one is (a few open
    tasks are found through ix_tasks_status_id, never by walking a million finished
    ones down the primary key)."""
    return _list_tasks(_statuses(statuses))


@functools.cache
def _list_tasks(statuses: tuple[TaskStatus, ...]) -> Sql:
    branches = " UNION ALL ".join(
        f"(SELECT * FROM tasks WHERE status = '{s.value}' AND id < :before_id ORDER BY id DESC LIMIT :limit)"
        for s in statuses
    )
    return Sql(
        sqlite=f"SELECT * FROM tasks WHERE status IN ({_literals(statuses)}) AND id < :before_id"
        " ORDER BY id DESC LIMIT :limit",
        postgres=f"SELECT * FROM ({branches}) AS t ORDER BY id DESC LIMIT :limit",
    )


def search_tasks(statuses: Collection[TaskStatus]) -> Sql:
    """History search (``statuses`` literals on SQLite, the ``statuses`` parameter
    on PostgreSQL; ``before_id``, ``pattern``, ``limit``). SQLite: ``+status`` keeps
    the planner off ix_tasks_status_id so it walks the primary key downwards and
    stops at LIMIT matches (no sort of every finished row)."""
    return _search_tasks(_statuses(statuses))


@functools.cache
def _search_tasks(statuses: tuple[TaskStatus, ...]) -> Sql:
    return Sql(
        sqlite=f"""
SELECT * FROM tasks
WHERE +status IN ({_literals(statuses)}) AND id < :before_id
  AND (subject LIKE :pattern ESCAPE '\\' OR description LIKE :pattern ESCAPE '\\'
       OR source LIKE :pattern ESCAPE '\\' OR coalesce(result_summary, '') LIKE :pattern ESCAPE '\\')
ORDER BY id DESC LIMIT :limit
""",
        postgres=_SEARCH_TASKS_POSTGRES,
    )


_SEARCH_TASKS_POSTGRES = """
SELECT * FROM tasks
WHERE status = ANY(:statuses::text[]) AND id < :before_id
  AND (subject ILIKE :pattern OR description ILIKE :pattern
       OR source ILIKE :pattern OR coalesce(result_summary, '') ILIKE :pattern)
ORDER BY id DESC LIMIT :limit
"""

# --- people's and scripts' conditional writes -------------------------------------

ADD_NOTE = Sql("INSERT INTO notes (task_id, at, author, text) VALUES (:id, :now, :author, :text) RETURNING *")

CANCEL = Sql("""
UPDATE tasks SET status = CASE WHEN status = 'active' THEN status ELSE 'canceled' END,
       cancel_requested = CASE WHEN status = 'active' THEN 1 ELSE cancel_requested END,
       completed_at = CASE WHEN status = 'active' THEN completed_at ELSE :now END,
       updated_at = :now, updated_by = :actor
WHERE id = :id AND status IN ('pending', 'blocked', 'waiting', 'active') RETURNING *
""")

SET_PRIORITY = Sql("""
UPDATE tasks SET priority = :priority, updated_at = :now, updated_by = :actor
WHERE id = :id AND status IN ('pending', 'blocked', 'waiting') RETURNING *
""")

DEFER = Sql("""
UPDATE tasks SET scheduled_for = :until, updated_at = :now, updated_by = :actor
WHERE id = :id AND status IN ('pending', 'blocked') RETURNING *
""")

# Later by :by ms than it is due now (or than now, for a task already due).
DEFER_BY = Sql("""
UPDATE tasks SET scheduled_for = CASE WHEN scheduled_for > :now THEN scheduled_for ELSE :now END + :by,
       updated_at = :now, updated_by = :actor
WHERE id = :id AND status IN ('pending', 'blocked') RETURNING *
""")


# A task that needed approval needs it again: it goes back to waiting for it.
RETRY = Sql("""
UPDATE tasks SET status = CASE WHEN approval IS NULL THEN 'pending' ELSE 'blocked' END,
       approval = CASE WHEN approval IS NULL THEN NULL ELSE 'pending' END,
       scheduled_for = :now, attempt_count = 0,
       completed_at = NULL, cancel_requested = 0, updated_at = :now, updated_by = :actor
WHERE id = :id AND status IN ('failed', 'canceled') RETURNING *
""")

CLOSE_TASK = Sql("""
UPDATE tasks SET status = :status, result_summary = :summary, updated_at = :now, updated_by = :actor,
       completed_at = CASE WHEN :status = 'blocked' THEN NULL ELSE :now END
WHERE id = :id AND status IN ('pending', 'active', 'blocked', 'waiting') RETURNING *
""")

# The running task's agent asks a person a question: stored on the task with the
# run that asked (its open run), the last answer cleared. The task stays active
# until its run is recorded (as ``asked``: ``vigil.fate``), then waits.
ASK = Sql("""
UPDATE tasks SET question = :question, choices = :choices, answer = NULL,
       asked_run = (SELECT max(r.id) FROM runs AS r WHERE r.task_id = :id AND r.finished_at IS NULL),
       updated_at = :now, updated_by = :actor
WHERE id = :id AND status = 'active' AND cancel_requested = 0 RETURNING *
""")

# A person's answer: the task is due at once, its attempt count kept (the note with
# the answer is written in the same transaction).
ANSWER = Sql("""
UPDATE tasks SET status = 'pending', answer = :answer, scheduled_for = :now, updated_at = :now,
       updated_by = :actor
WHERE id = :id AND status = 'waiting' RETURNING *
""")

# A blocked task back in the queue, due at once, its attempt count kept; not one
# awaiting a person's approval or review (``approve`` / ``reject`` decide those).
UNBLOCK = Sql("""
UPDATE tasks SET status = 'pending', scheduled_for = :now, completed_at = NULL, updated_at = :now,
       updated_by = :actor
WHERE id = :id AND status = 'blocked' AND coalesce(approval, '') <> 'pending' AND coalesce(review, '') <> 'pending'
RETURNING *
""")

APPROVE = Sql("""
UPDATE tasks SET status = 'pending', approval = 'approved', updated_at = :now, updated_by = :actor
WHERE id = :id AND status = 'blocked' AND approval = 'pending'
RETURNING *
""")

REJECT = Sql("""
UPDATE tasks SET status = 'canceled', approval = 'rejected', completed_at = :now,
       result_summary = :summary, updated_at = :now, updated_by = :actor
WHERE id = :id AND status = 'blocked' AND approval = 'pending'
RETURNING *
""")

# A reviewed result accepted: the task is done; a worktree's merge, when there was
# one, recorded with it (:worktree NULL keeps what is there).
APPROVE_REVIEW = Sql("""
UPDATE tasks SET status = 'completed', review = 'approved', completed_at = :now, updated_at = :now,
       updated_by = :actor, worktree = coalesce(CAST(:worktree AS text), worktree)
WHERE id = :id AND status = 'blocked' AND review = 'pending'
RETURNING *
""")

# An audit row written by a behaviour rather than a trigger (a merge: the branch it
# merged, the commit the base then pointed to, how).
ADD_EVENT = Sql("""
INSERT INTO task_events (task_id, at, actor, kind, from_value, to_value, detail)
VALUES (:id, :now, :actor, :kind, :from_value, :to_value, :detail)
""")

# A reviewed result refused: back to the queue at once (the reason is a note, written
# in the same transaction), its attempt count kept.
REJECT_REVIEW = Sql("""
UPDATE tasks SET status = 'pending', review = 'rejected', scheduled_for = :now, updated_at = :now,
       updated_by = :actor
WHERE id = :id AND status = 'blocked' AND review = 'pending'
RETURNING *
""")

# A completed task whose pull request came back (changes requested, checks failed):
# back to the queue at once like a rejected review, the merge its approval recorded
# replaced by :worktree (merged cleared), its attempt count kept.
SEND_BACK = Sql("""
UPDATE tasks SET status = 'pending', review = 'rejected', scheduled_for = :now, completed_at = NULL,
       worktree = CAST(:worktree AS text), updated_at = :now, updated_by = :actor
WHERE id = :id AND status = 'completed'
RETURNING *
""")

# An active task asks for a later retry (Store.request_retry). With no retry left it
# fails for good, as the dispatcher's own retries do; a requested cancel wins (the
# row does not match, and the dispatcher ends the run).
# The agent asked for another try: its fate (``vigil.fate.after_request``) written
# while the run goes on, the claim kept so that no other lane starts the task before
# this run is recorded.
REQUEST_RETRY = Sql("""
UPDATE tasks SET status = :status, scheduled_for = coalesce(CAST(:retry_at AS bigint), scheduled_for),
       completed_at = CASE WHEN CAST(:status AS text) = 'failed' THEN CAST(:now AS bigint) END,
       result_summary = :summary, updated_at = CAST(:now AS bigint), updated_by = :actor
WHERE id = :id AND status = 'active' AND cancel_requested = 0
RETURNING *
""")

# --- flood limits (``limits``) ------------------------------------------------------

# Depth the new task would have: 1 for a child of a root task, one more per ancestor.
# Stops one step past :max_depth, which is all the limit needs to know.
FOLLOW_UP_DEPTH = Sql("""
WITH RECURSIVE chain(id, depth) AS (
    SELECT CAST(:parent_id AS bigint), 1
    UNION ALL
    SELECT t.parent_id, c.depth + 1 FROM tasks t JOIN chain c ON t.id = c.id
    WHERE t.parent_id IS NOT NULL AND c.depth <= :max_depth
)
SELECT max(depth) AS depth FROM chain
""")

# Both counts stop at :cap rows (ix_tasks_parent, ix_tasks_source_created).
COUNT_CHILDREN = Sql("SELECT count(*) AS n FROM (SELECT 1 FROM tasks WHERE parent_id = :parent_id LIMIT :cap) AS x")
COUNT_SOURCE_SINCE = Sql("""
SELECT count(*) AS n FROM (SELECT 1 FROM tasks WHERE source = :source AND created_at > :since LIMIT :cap) AS x
""")

# Serialises inserts that count the same source or parent: on PostgreSQL an advisory
# lock (first key: "VIGT", next to the migrations' "VIGS", postgres/schema.py's
# LOCK_KEY; second: the name's hash). On SQLite BEGIN IMMEDIATE already serialises
# every writer: nothing to lock.
_COUNT_LOCK_KEY = 0x56494754
LOCK_COUNT = Sql(sqlite=None, postgres=f"SELECT pg_advisory_xact_lock({_COUNT_LOCK_KEY}, hashtext(:name))")
