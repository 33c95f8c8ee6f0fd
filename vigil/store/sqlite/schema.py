"""The SQLite schema as numbered migrations, applied on open.

``PRAGMA user_version`` holds the number of the last migration applied. Each
migration runs in its own ``BEGIN IMMEDIATE`` transaction and re-reads the version
inside it, so two processes opening a new file at once apply it once. A database
whose version is newer than ``SCHEMA_VERSION`` is refused, never modified.

Design notes:

* Audit rows, status counts and dependency counters are written by triggers, so
  every state change writes them in the same statement, whoever makes it. Writers
  set ``updated_by`` (the actor) and ``updated_at`` on each update; the triggers
  read them, never the SQL clock.
* Dedup is two partial unique indexes: ``open`` scope (one pending/active/blocked
  task per key) and ``ever`` scope (one ``ever`` row per key); an ``ever`` insert
  also refuses a key any earlier task used (checked in the insert statement).
* ``waiting_on`` counts unfinished dependencies; the claim index is partial on
  pending rows, so finished tasks never enter the claim's search.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from vigil.errors import NotADatabase, SchemaTooNew, StoreMoved
from vigil.faults import crash_point

_OPEN = "('pending','active','blocked')"

Migration = Callable[[sqlite3.Connection], None]
"""A migration step that needs more than one statement's SQL (a table rebuild). A
migration holding one runs with foreign keys off (they cannot be switched inside
a transaction), checked with ``PRAGMA foreign_key_check`` by the step itself."""

V1 = [
    """
    CREATE TABLE tasks (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,  -- ids never reused
        subject          TEXT    NOT NULL CHECK (length(trim(subject)) > 0),
        description      TEXT    NOT NULL DEFAULT '',
        skills           TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(skills)),
        priority         INTEGER NOT NULL DEFAULT 5 CHECK (priority BETWEEN 1 AND 9),
        status           TEXT    NOT NULL DEFAULT 'pending' CHECK (status IN
                             ('pending','active','blocked','completed','failed','canceled')),
        source           TEXT    NOT NULL DEFAULT 'human',
        source_key       TEXT,
        dedup            TEXT    NOT NULL DEFAULT 'open' CHECK (dedup IN ('open','ever')),
        parent_id        INTEGER REFERENCES tasks(id),
        scheduled_for    INTEGER NOT NULL,
        created_at       INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL,
        updated_by       TEXT    NOT NULL,
        started_at       INTEGER,
        completed_at     INTEGER,
        attempt_count    INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
        max_retries      INTEGER NOT NULL DEFAULT 3 CHECK (max_retries >= 0),
        cost_usd         REAL    NOT NULL DEFAULT 0,
        api_cost_usd     REAL    NOT NULL DEFAULT 0,
        tokens_in        INTEGER NOT NULL DEFAULT 0,
        tokens_out       INTEGER NOT NULL DEFAULT 0,
        result_summary   TEXT,
        result_detail    TEXT,
        model            TEXT,
        executor         TEXT,
        claimed_by       TEXT,
        lease_until      INTEGER,
        cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
        waiting_on       INTEGER NOT NULL DEFAULT 0 CHECK (waiting_on >= 0),
        approval         TEXT CHECK (approval IN ('pending', 'approved', 'rejected')),  -- NULL: not needed
        CHECK (dedup = 'open' OR source_key IS NOT NULL)
    )
    """,
    # Claim and next-due: one seek per priority level over pending rows only.
    "CREATE INDEX ix_tasks_claim ON tasks (waiting_on, priority, scheduled_for, id) WHERE status = 'pending'",
    "CREATE INDEX ix_tasks_status_id ON tasks (status, id)",
    f"CREATE UNIQUE INDEX ux_tasks_open_key ON tasks (source_key) WHERE source_key IS NOT NULL AND status IN {_OPEN}",
    "CREATE UNIQUE INDEX ux_tasks_ever_key ON tasks (source_key) WHERE dedup = 'ever'",
    "CREATE INDEX ix_tasks_key ON tasks (source_key) WHERE source_key IS NOT NULL",
    "CREATE INDEX ix_tasks_parent ON tasks (parent_id) WHERE parent_id IS NOT NULL",
    "CREATE INDEX ix_tasks_active ON tasks (lease_until) WHERE status = 'active'",
    # The flood limit on tasks per source per day counts one range of this index.
    "CREATE INDEX ix_tasks_source_created ON tasks (source, created_at)",
    """
    CREATE TABLE runs (
        id                 INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id            INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        attempt            INTEGER NOT NULL,
        started_at         INTEGER NOT NULL,
        finished_at        INTEGER,
        outcome            TEXT,
        error              TEXT,
        exit_code          INTEGER,
        cost_usd           REAL    NOT NULL DEFAULT 0,
        api_cost_usd       REAL    NOT NULL DEFAULT 0,
        tokens_in          INTEGER NOT NULL DEFAULT 0,
        tokens_out         INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        model              TEXT,
        session_id         TEXT,
        transcript_path    TEXT,
        executor           TEXT,
        claimed_by         TEXT,
        pid                INTEGER,
        pgid               INTEGER,
        proc_start         TEXT,
        UNIQUE (task_id, attempt)
    )
    """,
    "CREATE INDEX ix_runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL",
    # Crash recovery looks up the runs still open; there are only ever a few.
    "CREATE INDEX ix_runs_open ON runs (task_id) WHERE finished_at IS NULL",
    """
    CREATE TABLE task_events (
        id         INTEGER PRIMARY KEY,
        task_id    INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        at         INTEGER NOT NULL,
        actor      TEXT    NOT NULL,
        kind       TEXT    NOT NULL,
        from_value TEXT,
        to_value   TEXT,
        detail     TEXT
    )
    """,
    "CREATE INDEX ix_task_events_task ON task_events (task_id, id)",
    """
    CREATE TABLE notes (
        id      INTEGER PRIMARY KEY,
        task_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        at      INTEGER NOT NULL,
        author  TEXT    NOT NULL,
        text    TEXT    NOT NULL CHECK (length(trim(text)) > 0)
    )
    """,
    "CREATE INDEX ix_notes_task ON notes (task_id, id)",
    """
    CREATE TABLE task_deps (
        task_id    INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        depends_on INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        PRIMARY KEY (task_id, depends_on),
        CHECK (task_id != depends_on)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX ix_task_deps_depends_on ON task_deps (depends_on)",
    """
    CREATE TABLE sensor_state (
        name                 TEXT    PRIMARY KEY,
        enabled              INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
        last_run_at          INTEGER,
        last_duration_ms     INTEGER,
        last_status          TEXT CHECK (last_status IN ('ok', 'error', 'timeout')),
        last_error           TEXT,
        consecutive_failures INTEGER NOT NULL DEFAULT 0,
        created_last         INTEGER NOT NULL DEFAULT 0,
        ignored_last         INTEGER NOT NULL DEFAULT 0,
        dropped_last         INTEGER NOT NULL DEFAULT 0,
        rejected_last        INTEGER NOT NULL DEFAULT 0,
        next_due_at          INTEGER,
        state                TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(state))
    )
    """,
    """
    CREATE TABLE loop_state (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL CHECK (json_valid(value))
    )
    """,
    """
    CREATE TABLE status_counts (
        status TEXT    PRIMARY KEY,
        n      INTEGER NOT NULL DEFAULT 0
    )
    """,
    """
    INSERT INTO status_counts (status) VALUES
        ('pending'), ('active'), ('blocked'), ('completed'), ('failed'), ('canceled')
    """,
    # --- triggers: audit, counts, dependency counters -----------------------------
    """
    CREATE TRIGGER tasks_after_insert AFTER INSERT ON tasks BEGIN
        UPDATE status_counts SET n = n + 1 WHERE status = new.status;
        INSERT INTO task_events (task_id, at, actor, kind, to_value)
        VALUES (new.id, new.created_at, new.updated_by, 'created', new.status);
    END
    """,
    """
    CREATE TRIGGER tasks_after_delete AFTER DELETE ON tasks BEGIN
        UPDATE status_counts SET n = n - 1 WHERE status = old.status;
    END
    """,
    """
    CREATE TRIGGER tasks_status_changed AFTER UPDATE OF status ON tasks
    WHEN old.status IS NOT new.status BEGIN
        UPDATE status_counts SET n = n - 1 WHERE status = old.status;
        UPDATE status_counts SET n = n + 1 WHERE status = new.status;
        INSERT INTO task_events (task_id, at, actor, kind, from_value, to_value)
        VALUES (new.id, new.updated_at, new.updated_by, 'status', old.status, new.status);
    END
    """,
    """
    CREATE TRIGGER tasks_completed_unblocks AFTER UPDATE OF status ON tasks
    WHEN new.status = 'completed' AND old.status != 'completed' BEGIN
        UPDATE tasks SET waiting_on = waiting_on - 1
        WHERE id IN (SELECT task_id FROM task_deps WHERE depends_on = new.id);
    END
    """,
    """
    CREATE TRIGGER tasks_priority_changed AFTER UPDATE OF priority ON tasks
    WHEN old.priority != new.priority BEGIN
        INSERT INTO task_events (task_id, at, actor, kind, from_value, to_value)
        VALUES (new.id, new.updated_at, new.updated_by, 'priority', old.priority, new.priority);
    END
    """,
    """
    CREATE TRIGGER tasks_deferred AFTER UPDATE OF scheduled_for ON tasks
    WHEN old.scheduled_for != new.scheduled_for AND old.status = new.status BEGIN
        INSERT INTO task_events (task_id, at, actor, kind, from_value, to_value)
        VALUES (new.id, new.updated_at, new.updated_by, 'scheduled',
                old.scheduled_for, new.scheduled_for);
    END
    """,
    """
    CREATE TRIGGER tasks_approval_changed AFTER UPDATE OF approval ON tasks
    WHEN new.approval IS NOT old.approval BEGIN
        INSERT INTO task_events (task_id, at, actor, kind, from_value, to_value, detail)
        VALUES (new.id, new.updated_at, new.updated_by, 'approval', old.approval, new.approval,
                CASE WHEN new.approval = 'rejected' THEN new.result_summary END);
    END
    """,
    """
    CREATE TRIGGER tasks_cancel_requested AFTER UPDATE OF cancel_requested ON tasks
    WHEN new.cancel_requested = 1 AND old.cancel_requested = 0 BEGIN
        INSERT INTO task_events (task_id, at, actor, kind, to_value)
        VALUES (new.id, new.updated_at, new.updated_by, 'cancel_requested', new.status);
    END
    """,
    """
    CREATE TRIGGER task_deps_after_insert AFTER INSERT ON task_deps BEGIN
        UPDATE tasks SET waiting_on = waiting_on + 1
        WHERE id = new.task_id
          AND (SELECT status FROM tasks WHERE id = new.depends_on) != 'completed';
    END
    """,
]

# V2: retention. Pruned tasks leave two things behind: their spend in the cost
# archive, and their source keys (an ``ever`` add must keep refusing a key a
# pruned task used). Each archive row sums the finished runs of pruned tasks in one
# UTC hour (``span_ms`` 3600000) or, once a prune has folded the hours of an old
# day together, one UTC day (86400000), with the same task skills (the JSON array as
# stored), source, model and sensor origin. A task counts once per roll-up group, so
# four task counts are kept: each is 1 on exactly one run of a task (its last run
# overall, in its hour, in its day, with its model), and the roll-up sums the one its
# grouping needs (a day row's ``tasks_hour`` is its ``tasks_day``: the day is its
# hour). A retired key keeps the time it was retired, for ``[retention] keep_keys``.
V2 = [
    """
    CREATE TABLE cost_archive (
        start_ms           INTEGER NOT NULL,  -- start of the UTC hour (or day) the runs finished in
        span_ms            INTEGER NOT NULL CHECK (span_ms IN (3600000, 86400000)),
        skills             TEXT    NOT NULL,
        source             TEXT    NOT NULL,
        model              TEXT    NOT NULL,  -- '(none)' when the run named none
        sensor             TEXT    NOT NULL,  -- the sensor that started the chain, or '(none)'
        runs               INTEGER NOT NULL,
        tasks_last         INTEGER NOT NULL,  -- by source, skill, sensor
        tasks_hour         INTEGER NOT NULL,
        tasks_day          INTEGER NOT NULL,
        tasks_model        INTEGER NOT NULL,
        cost_usd           REAL    NOT NULL,
        api_cost_usd       REAL    NOT NULL,
        tokens_in          INTEGER NOT NULL,
        tokens_out         INTEGER NOT NULL,
        cache_read_tokens  INTEGER NOT NULL,
        cache_write_tokens INTEGER NOT NULL,
        PRIMARY KEY (start_ms, span_ms, skills, source, model, sensor)
    ) WITHOUT ROWID
    """,
    # The fold walks the hour rows only (a few days of them), not the day rows.
    "CREATE INDEX ix_cost_archive_hours ON cost_archive (start_ms) WHERE span_ms = 3600000",
    "CREATE TABLE retired_keys (source_key TEXT PRIMARY KEY, retired_at INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE INDEX ix_retired_keys_at ON retired_keys (retired_at)",
]

# V3: the real agent CLIs. ``runs.permission_denials``: the tool calls the agent CLI
# refused in that run, a JSON array of one-line strings (NULL: none).
# ``tasks.workdir``: the folder the task's agent works in (NULL: the skill's or the
# configured one, else the home).
V3 = [
    "ALTER TABLE runs ADD COLUMN permission_denials TEXT",
    "ALTER TABLE tasks ADD COLUMN workdir TEXT",
]

# V4: the agent's side of the wall. ``tasks.review``: a task held for a person's
# review after its run (NULL: not under review; ``pending`` while it waits, then
# ``approved`` or ``rejected``), audited like approval. ``tasks.denials``: how many
# actions its agents were refused, over every run. ``runs.workspace``: the folder the
# run's agent worked in.
V4 = [
    "ALTER TABLE tasks ADD COLUMN review TEXT CHECK (review IN ('pending', 'approved', 'rejected'))",
    "ALTER TABLE tasks ADD COLUMN denials INTEGER NOT NULL DEFAULT 0 CHECK (denials >= 0)",
    "ALTER TABLE runs ADD COLUMN workspace TEXT",
    """
    CREATE TRIGGER tasks_review_changed AFTER UPDATE OF review ON tasks
    WHEN new.review IS NOT old.review BEGIN
        INSERT INTO task_events (task_id, at, actor, kind, from_value, to_value)
        VALUES (new.id, new.updated_at, new.updated_by, 'review', old.review, new.review);
    END
    """,
]

# V5: the scheduler's record of runs not made. ``sensor_state.skips``: the latest
# stretches of a sensor's skipped runs, a JSON array of objects ``{"reason",
# "first_at", "last_at", "runs"}``, oldest first (``vigil.store.state``).
V5 = [
    "ALTER TABLE sensor_state ADD COLUMN skips TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(skips))",
]

# V6: runs that tell the truth, accounts, budgets per task. ``runs.summary``: the
# run's own summary (the agent's, when it closed its task, else the head of what
# the run ended with); ``runs.agent_status``: the status the agent gave its task in
# that run (completed, failed, blocked, or pending when it asked for a retry; NULL:
# it did not close it); ``runs.account``: the agent CLI's account the run used.
# ``tasks.max_cost_usd``: the most the task may spend over its runs (NULL: its
# skill's, else no limit).
V6 = [
    "ALTER TABLE runs ADD COLUMN summary TEXT",
    "ALTER TABLE runs ADD COLUMN agent_status TEXT",
    "ALTER TABLE runs ADD COLUMN account TEXT",
    "ALTER TABLE tasks ADD COLUMN max_cost_usd REAL CHECK (max_cost_usd IS NULL OR max_cost_usd >= 0)",
]

# V7: code work (docs/coding.md). ``tasks.code``: the task's own code options (a JSON
# object: repo, base, workspace, checks, review, merge; NULL: none), a follow-up
# without its own getting its parent's. ``tasks.worktree``: the git worktree Vigil
# made for it (JSON; NULL: none yet). ``runs.checks`` (a JSON array of how each check
# ended), ``runs.changes`` (JSON: what the run left on the branch) and ``runs.gated``
# (1: the run's result waits on checks or review, not on the agent's own close).
V7 = [
    "ALTER TABLE tasks ADD COLUMN code TEXT",
    "ALTER TABLE tasks ADD COLUMN worktree TEXT",
    "ALTER TABLE runs ADD COLUMN checks TEXT",
    "ALTER TABLE runs ADD COLUMN changes TEXT",
    "ALTER TABLE runs ADD COLUMN gated INTEGER NOT NULL DEFAULT 0 CHECK (gated IN (0, 1))",
]


# V8: questions to a person. A new status, ``waiting`` (for a person's answer to
# the agent's question: open, so it holds its source key like the other open
# statuses), needs the CHECK on ``tasks.status`` changed, which SQLite can only do
# by rebuilding the table (https://www.sqlite.org/lang_altertable.html#otheralter):
# ``rebuild_tasks`` below, run with foreign keys off. ``tasks.question`` /
# ``choices`` (a JSON array as text, NULL: none) / ``answer`` / ``asked_run`` (the
# run whose agent asked) hold the latest question; ``runs.resumed_from`` is the run
# whose agent session a run continued (NULL: a fresh session).
_STATUS_CHECK = re.compile(
    r"\(\s*"
    + r"\s*,\s*".join(f"'{s}'" for s in ("pending", "active", "blocked", "completed", "failed", "canceled"))
    + r"\s*\)"
)
_NEW_STATUSES = "('pending','active','blocked','completed','failed','canceled','waiting')"
_NEW_OPEN = "('pending','active','blocked','waiting')"


def rebuild_tasks(conn: sqlite3.Connection) -> None:
    """The documented rebuild of ``tasks`` with ``waiting`` in its status CHECK and
    in the open dedup index, inside the migration's transaction (foreign keys
    already off): the new table made from the stored one's own SQL (so columns
    added by earlier migrations, or by other ones, are kept), the rows copied with
    their ids and the id sequence, the old table dropped, the new one renamed;
    then every index and
    trigger put back as it was (the triggers of every table: one on ``task_deps``
    names ``tasks``, and a rename checks them all), and a ``status_counts`` row
    for the new status. Raises ``sqlite3.IntegrityError`` if a foreign key no
    longer holds (nothing is then committed)."""
    (table_sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'tasks'").fetchone()
    new_sql, found = _STATUS_CHECK.subn(_NEW_STATUSES, table_sql)
    if found != 1:
        raise RuntimeError("tasks.status CHECK not found as expected: cannot add the waiting status")
    new_sql = re.sub(r'^\s*CREATE TABLE "?tasks"?', "CREATE TABLE tasks_rebuilt", new_sql, count=1)
    kept = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND "
        "(type = 'trigger' OR (type = 'index' AND tbl_name = 'tasks')) ORDER BY rowid"
    ).fetchall()
    for kind, name, _ in kept:
        if kind == "trigger":
            conn.execute(f'DROP TRIGGER "{name}"')
    conn.execute(new_sql)
    columns = ", ".join(f'"{row[1]}"' for row in conn.execute("PRAGMA table_info(tasks)"))
    conn.execute(f"INSERT INTO tasks_rebuilt ({columns}) SELECT {columns} FROM tasks")
    # ids are never reused: the new table's sequence continues past the old one's
    sequence = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'tasks'").fetchone()
    conn.execute("DROP TABLE tasks")
    conn.execute("ALTER TABLE tasks_rebuilt RENAME TO tasks")
    # the copy's own row (seq 0 even when it copied nothing) must not stand in for it
    conn.execute("DELETE FROM sqlite_sequence WHERE name = 'tasks'")
    if sequence is not None:
        conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('tasks', ?)", (sequence[0],))
    for _, name, sql in kept:
        conn.execute(sql.replace(_OPEN, _NEW_OPEN) if name == "ux_tasks_open_key" else sql)
    conn.execute("INSERT INTO status_counts (status, n) VALUES ('waiting', 0)")
    if conn.execute("PRAGMA foreign_key_check").fetchone() is not None:
        raise sqlite3.IntegrityError("a foreign key no longer holds after rebuilding tasks")


V8: list[str | Migration] = [
    "ALTER TABLE tasks ADD COLUMN question TEXT",
    "ALTER TABLE tasks ADD COLUMN choices TEXT CHECK (choices IS NULL OR json_valid(choices))",
    "ALTER TABLE tasks ADD COLUMN answer TEXT",
    "ALTER TABLE tasks ADD COLUMN asked_run INTEGER",
    "ALTER TABLE runs ADD COLUMN resumed_from INTEGER",
    rebuild_tasks,
]

# V9: the cost archive keeps the account. ``cost_archive.account``: the runs'
# "executor:account" as the account roll-up keys them ('(none)' without one), part of
# the primary key; ``tasks_account``: 1 on a task's last run with that account. Rows
# archived before kept none: they are '(none)', where every run of a task counts
# together, so their ``tasks_account`` is their ``tasks_last``. A WITHOUT ROWID
# table's primary key cannot be altered: the table is rebuilt (create, copy, drop,
# rename, index), in the migration's transaction; nothing refers to it.
V9 = [
    """
    CREATE TABLE cost_archive_v7 (
        start_ms           INTEGER NOT NULL,  -- start of the UTC hour (or day) the runs finished in
        span_ms            INTEGER NOT NULL CHECK (span_ms IN (3600000, 86400000)),
        skills             TEXT    NOT NULL,
        source             TEXT    NOT NULL,
        model              TEXT    NOT NULL,  -- '(none)' when the run named none
        sensor             TEXT    NOT NULL,  -- the sensor that started the chain, or '(none)'
        account            TEXT    NOT NULL,  -- "executor:account" of the runs, or '(none)'
        runs               INTEGER NOT NULL,
        tasks_last         INTEGER NOT NULL,  -- by source, skill, sensor
        tasks_hour         INTEGER NOT NULL,
        tasks_day          INTEGER NOT NULL,
        tasks_model        INTEGER NOT NULL,
        tasks_account      INTEGER NOT NULL,
        cost_usd           REAL    NOT NULL,
        api_cost_usd       REAL    NOT NULL,
        tokens_in          INTEGER NOT NULL,
        tokens_out         INTEGER NOT NULL,
        cache_read_tokens  INTEGER NOT NULL,
        cache_write_tokens INTEGER NOT NULL,
        PRIMARY KEY (start_ms, span_ms, skills, source, model, sensor, account)
    ) WITHOUT ROWID
    """,
    """
    INSERT INTO cost_archive_v7 (start_ms, span_ms, skills, source, model, sensor, account, runs, tasks_last,
                                 tasks_hour, tasks_day, tasks_model, tasks_account, cost_usd, api_cost_usd,
                                 tokens_in, tokens_out, cache_read_tokens, cache_write_tokens)
    SELECT start_ms, span_ms, skills, source, model, sensor, '(none)', runs, tasks_last,
           tasks_hour, tasks_day, tasks_model, tasks_last, cost_usd, api_cost_usd,
           tokens_in, tokens_out, cache_read_tokens, cache_write_tokens
    FROM cost_archive
    """,
    "DROP TABLE cost_archive",
    "ALTER TABLE cost_archive_v7 RENAME TO cost_archive",
    "CREATE INDEX ix_cost_archive_hours ON cost_archive (start_ms) WHERE span_ms = 3600000",
]

# V10: finished tasks in the order they finished (the history, the queue's recently
# finished rows): a walk down this index instead of a sort of every finished task.
V10 = [
    "CREATE INDEX ix_tasks_finished ON tasks (completed_at, id) WHERE completed_at IS NOT NULL",
]

# V11: where a task meets GitHub (``tasks.github``: a JSON object, ``GitHubLink``;
# NULL: nowhere): the issue it came from, the pull request its work became.
V11 = [
    "ALTER TABLE tasks ADD COLUMN github TEXT CHECK (github IS NULL OR json_valid(github))",
]

# V12: how each run's spend was priced (``runs.priced_by``, one line: the CLI's own
# figure, the price table, a family's price; NULL: not priced, as every run before).
V12 = [
    "ALTER TABLE runs ADD COLUMN priced_by TEXT",
]

MIGRATIONS: list[Sequence[str | Migration]] = [V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12]
SCHEMA_VERSION = len(MIGRATIONS)


def user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


# ``PRAGMA user_version`` of a file ``vigil store migrate`` moved into PostgreSQL:
# beyond any schema number, so that a Vigil from before this mark refuses the file as
# too new, and this one refuses every read and write of it (``refuse_if_moved``).
MOVED_VERSION = 2_000_000_000
MOVED_TABLE = "store_moved"  # where it went and when (written with the mark, outside the schema)


def mark_moved(conn: sqlite3.Connection, location: str, now_ms: int) -> None:
    """Mark the file moved to ``location`` (a URL, password masked), inside the
    caller's write transaction: once committed, nothing opens it again."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {MOVED_TABLE} (location TEXT NOT NULL, moved_at INTEGER NOT NULL)")
    conn.execute(f"INSERT INTO {MOVED_TABLE} (location, moved_at) VALUES (?, ?)", (location, now_ms))
    conn.execute(f"PRAGMA user_version = {MOVED_VERSION}")


def moved_problem(conn: sqlite3.Connection, path: object) -> str:
    """What to tell a process that found the file moved."""
    try:
        row = conn.execute(f"SELECT location, moved_at FROM {MOVED_TABLE} ORDER BY moved_at DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        row = None
    where, when = ("PostgreSQL", "") if row is None else (str(row[0]), f" on {_utc(row[1])}")
    return (
        f"{path} was moved to {where} by vigil store migrate{when} and is kept only as a backup; "
        "point this home at that database ([store] url in vigil.toml, or VIGIL_STORE_URL) and start again"
    )


def _utc(ms: object) -> str:
    try:
        return datetime.fromtimestamp(int(str(ms)) / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (ValueError, OverflowError, OSError):
        return "an unknown date"


def refuse_if_moved(conn: sqlite3.Connection, path: object) -> None:
    """Raise ``StoreMoved`` when the file was moved into PostgreSQL: checked at the
    start of every read and write (one pragma, a few microseconds)."""
    if user_version(conn) == MOVED_VERSION:
        raise StoreMoved(moved_problem(conn, path))


def check_not_newer(conn: sqlite3.Connection, path: object) -> int:
    """The file's schema version; raises ``SchemaTooNew`` if we cannot read it, and
    ``StoreMoved`` for a file moved into PostgreSQL."""
    version = user_version(conn)
    if version == MOVED_VERSION:
        raise StoreMoved(moved_problem(conn, path))
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{path} has schema version {version}, newer than this Vigil's {SCHEMA_VERSION}; "
            "upgrade Vigil (the database was not modified)"
        )
    return version


def check_openable(conn: sqlite3.Connection, path: object) -> None:
    """Refuse a file Vigil must not change, before anything is written to it (even
    the journal mode): a newer schema (``SchemaTooNew``), or another application's
    SQLite database, which has tables but no Vigil schema version (``NotADatabase``)."""
    # One statement reads both from one snapshot: another process may be migrating
    # this file, and tables with version 0 must not be seen between its steps.
    version, has_schema = conn.execute(
        "SELECT user_version, EXISTS (SELECT 1 FROM sqlite_master) FROM pragma_user_version"
    ).fetchone()
    if version > SCHEMA_VERSION:
        check_not_newer(conn, path)  # raises with the version it reads
    if version == 0 and has_schema:
        raise NotADatabase(
            f"{path} is not a Vigil database (an SQLite database of another program; it was not modified)"
        )


def migrate(conn: sqlite3.Connection, path: object) -> None:
    """Apply every missing migration, each in its own transaction."""
    if check_not_newer(conn, path) == SCHEMA_VERSION:
        return
    for number, statements in enumerate(MIGRATIONS, start=1):
        rebuilds = any(callable(step) for step in statements)
        if rebuilds:
            # a dropped table's rows must not cascade into runs, notes and events
            conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated.
            if check_not_newer(conn, path) < number:
                for step in statements:
                    if callable(step):
                        step(conn)
                    else:
                        conn.execute(step)
                crash_point("during-migration")
                conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            if rebuilds:
                conn.execute("PRAGMA foreign_keys = ON")
