"""The task store: the one place Vigil's state lives.

``Store`` is the protocol every backend implements; ``vigil.store.sqlite`` is the
embedded default. Every method is a single atomic unit of work unless its docstring
says otherwise: it either happens entirely or not at all, and every state change
writes its ``task_events`` row in the same transaction.

Methods raise only ``vigil.errors`` types: ``TaskNotFound`` and
``InvalidTransition`` (input errors), ``StoreBusy`` and ``StoreError``.
``actor`` names who asked (``human``, ``agent``, ``dispatcher``, ``sensor:<name>``)
and is written to the audit trail.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from vigil.clock import Clock
from vigil.config import Settings
from vigil.errors import StoreError
from vigil.models import (
    AddResult,
    Attention,
    BatchResult,
    Claim,
    CostRow,
    LineResult,
    NewTask,
    Note,
    Outcome,
    PruneResult,
    Run,
    SensorRun,
    SensorState,
    Task,
    TaskEvent,
    TaskStatus,
)
from vigil.task_query import TaskQuery, TaskWindow

if TYPE_CHECKING:
    from vigil.store.postgres import PostgresStore
    from vigil.store.tasks import Tasks


async def open_store(settings: Settings, clock: Clock | None = None) -> Store:
    """Open the store the settings name: the PostgreSQL database at
    ``settings.store.url``, else the home's SQLite file. psycopg is imported only
    for PostgreSQL; without it, raises ``StoreError`` saying what to install."""
    if settings.store.url is not None:
        return await _open_postgres(settings, clock)
    from vigil.store.sqlite import SqliteStore

    return await SqliteStore.open(
        settings.store.path,
        clock=clock,
        synchronous=settings.store.synchronous,
        busy_timeout_ms=settings.store.busy_timeout_ms,
        default_max_retries=settings.dispatch.max_retries,
        limits=settings.limits,
    )


@contextmanager
def task_desk(settings: Settings) -> Iterator[Tasks]:
    """The task methods of the store the settings name, blocking, for one-shot
    commands. On SQLite they run on a plain connection in the caller's thread: no
    event loop, no worker thread. On PostgreSQL the store is opened with an event
    loop (its migration and listener are async) and the calls borrow its pooled
    sessions. Closed on exit; raises as ``open_store``."""
    if settings.store.url is not None:
        import asyncio

        with asyncio.Runner() as runner:
            store = runner.run(_open_postgres(settings, None))
            try:
                yield store.tasks
            finally:
                runner.run(store.close())
        return
    from vigil.clock import SystemClock
    from vigil.store.sqlite_db import Connection, SqliteEngine
    from vigil.store.sqlite_schema import check_openable, migrate
    from vigil.store.tasks import Tasks

    path = settings.store.path
    conn = Connection.open(
        path,
        synchronous=settings.store.synchronous,
        busy_timeout_ms=settings.store.busy_timeout_ms,
        check=check_openable,
    )
    try:
        conn.read(lambda c: migrate(c, path))
        yield Tasks(SqliteEngine(conn), SystemClock(), settings.dispatch.max_retries, settings.limits)
    finally:
        conn.close()


async def _open_postgres(settings: Settings, clock: Clock | None) -> PostgresStore:
    url = settings.store.url
    assert url is not None
    try:
        from vigil.store.postgres import PostgresStore
    except ImportError as err:
        if (err.name or "").split(".")[0] not in ("psycopg", "psycopg_pool"):
            raise
        raise StoreError(
            f"{settings.store.location} needs PostgreSQL support, which is not installed: pip install 'vigil[postgres]'"
        ) from None
    return await PostgresStore.open(
        url,
        clock=clock,
        default_max_retries=settings.dispatch.max_retries,
        limits=settings.limits,
        busy_timeout_ms=settings.store.busy_timeout_ms,
    )


class CostGroup(StrEnum):
    DAY = "day"
    SKILL = "skill"
    SOURCE = "source"
    MODEL = "model"
    HOUR = "hour"  # key "YYYY-MM-DDTHH" (UTC): the TUI's 24-hour chart
    SENSOR = "sensor"  # the sensor that started the task's parent chain; "(none)" for others


class TaskWriter(Protocol):
    """Adding tasks (one, or a batch in one transaction)."""

    async def add_task(self, new: NewTask, *, actor: str = "human") -> AddResult:
        """Add one task, or report the task that already holds its source key.

        Dedup is decided by the database in the same statement as the insert.
        Raises ``TaskNotFound`` for a missing parent or dependency, ``InputError``
        for a dependency on itself.
        """
        ...

    async def add_tasks(self, news: Sequence[NewTask], *, actor: str) -> BatchResult:
        """Add many tasks in one transaction; duplicates are counted as ignored."""
        ...

    async def add_each(self, news: Sequence[NewTask], *, actor: str) -> list[LineResult]:
        """Add many tasks in one transaction and say what became of each, in order:
        created, existing (its key's holder), or refused (a flood limit, counted as
        ``add_tasks`` counts it; a missing parent or dependency). Raises
        ``InputError`` for a task that is not valid (nothing is added then)."""
        ...


class TaskReader(Protocol):
    """Reading tasks, their history and the spend (one read each, no lock held)."""

    async def get_task(self, task_id: int) -> Task:
        """The task; raises ``TaskNotFound``."""
        ...

    async def list_tasks(
        self,
        *,
        statuses: Collection[TaskStatus] | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Task]:
        """Tasks newest first (by id), keyset-paged: pass the last id seen as
        ``before_id`` for the next page. ``statuses`` None means every status."""
        ...

    async def search_tasks(
        self,
        text: str,
        *,
        statuses: Collection[TaskStatus] | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Task]:
        """Tasks whose subject, description, source or result summary contains
        ``text`` (case-insensitive for ASCII), newest first, keyset-paged like
        ``list_tasks``. Walks the primary key downwards from ``before_id``: cost is
        bounded by the rows it passes, so a rare match over a huge history is slower
        (one read, no lock held). ``statuses`` None means every status."""
        ...

    async def task_window(
        self, query: TaskQuery, *, offset: int = 0, limit: int = 100, recent_since_ms: int | None = None
    ) -> TaskWindow:
        """One page of the tasks ``query`` asks for, in its order: the rows from
        ``offset`` (0-based; one at or past the end gives the last page), at most
        ``limit``, with how many match in all and what the queue's header shows
        (counts per state, the running tasks, the next task and due time, and, with
        ``recent_since_ms``, the last few completed or failed since then, the latest
        finish first). One read transaction: the page, the total and the counts
        agree. Filters and sorts run in the database over indexed rows (see
        ``vigil.store.window_sql`` for what each costs). Raises ``InputError`` for a
        negative offset or a limit below 1."""
        ...

    async def finished_tasks(
        self, text: str = "", *, before: tuple[int, int] | None = None, limit: int = 100
    ) -> list[Task]:
        """Completed, failed and canceled tasks, the latest finish first (then the
        higher id), keyset-paged: pass the last row's ``(completed_at, id)`` as
        ``before`` for the next page. ``text`` non-empty keeps tasks whose subject,
        description, source or result summary contains it (case-insensitive for
        ASCII); a rare match over a long history reads until a page is found."""
        ...

    async def queue(self, *, limit: int = 200) -> list[Task]:
        """Open tasks in the order the dispatcher will take them: active first, then
        due pending tasks by (priority, scheduled_for, id), then pending tasks that
        wait (not yet due, or on a dependency) by due time, then blocked tasks."""
        ...

    async def count_by_status(self) -> dict[TaskStatus, int]:
        """How many tasks have each status (every status present, zeros included).
        O(1): kept by triggers, not counted."""
        ...

    async def next_due_at(self) -> int | None:
        """Earliest ``scheduled_for`` of a pending task with no unfinished
        dependency; None when there is none."""
        ...

    async def attention(self, since_ms: int) -> Attention:
        """How many tasks await review and approval, and how many runs finished
        since ``since_ms`` (epoch ms) had actions denied to their agent. One read."""
        ...

    async def get_run(self, run_id: int) -> Run | None:
        """The run with id ``run_id``; None when there is none (never recorded, or
        pruned with its task)."""
        ...

    async def list_runs(self, task_id: int) -> list[Run]:
        """The task's attempts, oldest first."""
        ...

    async def list_events(self, task_id: int) -> list[TaskEvent]:
        """The task's audit trail, oldest first."""
        ...

    async def events_after(
        self,
        after_id: int,
        *,
        since_ms: int | None = None,
        task_id: int | None = None,
        kinds: Collection[str] = (),
        limit: int = 500,
    ) -> list[TaskEvent]:
        """Audit rows of every task with ``id > after_id``, oldest first, at most
        ``limit``: the event stream (``vigil events``). ``since_ms`` keeps rows at or
        after that time, ``task_id`` one task's, ``kinds`` those kinds (empty: all).
        One read. On PostgreSQL ids are handed out before commit, so a row may
        appear below an id already read: a follower reads back a little (see
        ``vigil.events``)."""
        ...

    async def list_notes(self, task_id: int) -> list[Note]:
        """The task's notes, oldest first."""
        ...

    async def dependencies(self, task_id: int) -> list[int]:
        """Ids of the tasks this task depends on."""
        ...

    async def cost_rollup(self, *, since_ms: int, by: CostGroup) -> list[CostRow]:
        """Spend of runs finished at or after ``since_ms``, grouped, largest cost
        first (by day: newest day first).

        Runs of pruned tasks still count (``prune`` folds them into an hourly
        archive first), so totals do not change when a prune runs. An archived hour
        counts whole when ``since_ms`` falls inside it: for the runs of pruned tasks
        the window starts at the top of that UTC hour. ``tasks`` counts each task
        once per group, archived or not."""
        ...

    async def data_version(self) -> int:
        """A number that changes whenever another connection commits (cheap)."""
        ...


class TaskChanges(Protocol):
    """The conditional writes on one task (``InvalidTransition`` when its status refuses)."""

    async def cancel(self, task_id: int, *, actor: str) -> Task:
        """Pending/blocked → canceled. An active task only gets ``cancel_requested``
        (the dispatcher honours it); its status does not change."""
        ...

    async def set_priority(self, task_id: int, priority: int, *, actor: str) -> Task:
        """Change the priority of a pending or blocked task."""
        ...

    async def defer(self, task_id: int, until_ms: int, *, actor: str) -> Task:
        """Set ``scheduled_for`` of a pending or blocked task."""
        ...

    async def defer_by(self, task_id: int, by_ms: int, *, actor: str) -> Task:
        """Make a pending or blocked task due ``by_ms`` later than it is due now (a
        task already due: than now), in one statement. Raises ``InputError`` for
        ``by_ms`` ≤ 0."""
        ...

    async def retry(self, task_id: int, *, actor: str) -> Task:
        """Failed/canceled → pending, due now, attempts reset; runs, notes and
        events are kept. Raises ``DuplicateOpenTask`` if another open task holds
        the source key meanwhile."""
        ...

    async def close_task(self, task_id: int, status: TaskStatus, summary: str, *, actor: str) -> Task:
        """Close an open task as completed, failed or blocked with a summary (the
        agent closing its own task). An active task keeps its claim so the
        dispatcher still records the run; its status is then kept."""
        ...

    async def request_retry(self, task_id: int, retry_at: int, summary: str, *, actor: str) -> Task:
        """An active task asks to be tried again at ``retry_at`` (epoch ms): pending,
        due then, its attempt counted (the claim counted it), the summary kept; with
        no retry left (``attempt_count > max_retries``) it fails for good instead,
        its summary "gave up after N attempts: …". The claim stays so the dispatcher
        still records the run; the status is then kept. One conditional ``UPDATE``,
        audited as a ``status`` event. Raises ``InvalidTransition`` for a task that
        is not active or whose cancel was requested, ``TaskNotFound``."""
        ...

    async def approve(self, task_id: int, *, actor: str) -> Task:
        """A task awaiting approval (blocked, approval pending) → pending, approval
        ``approved``; a task awaiting review (blocked, review pending) → completed,
        review ``approved``. One transaction, audited (``approval`` or ``review``
        event). Raises ``InvalidTransition`` for a task awaiting neither,
        ``TaskNotFound``."""
        ...

    async def reject(self, task_id: int, reason: str, *, actor: str) -> Task:
        """A task awaiting approval → canceled, approval ``rejected``, the reason in
        its summary and in the ``approval`` event; a task awaiting review → pending
        and due now, review ``rejected``, the reason a note by ``actor`` (so its next
        run's agent reads it), its attempt count kept. One transaction. Raises
        ``InputError`` for an empty reason, ``InvalidTransition`` for a task awaiting
        neither."""
        ...

    async def add_note(self, task_id: int, text: str, *, author: str) -> Note:
        """Attach a progress note to any task."""
        ...


class DispatchStore(Protocol):
    """What the dispatch loop and crash recovery do to tasks and runs."""

    async def claim_next(
        self, *, worker: str, lease_ms: int, executor: str | None = None, max_priority: int | None = None
    ) -> Claim | None:
        """Take the most urgent due task: pending, ``scheduled_for`` ≤ now, every
        dependency completed; order priority, scheduled_for, id. Marks it active,
        counts the attempt and opens its ``runs`` row, in one transaction. None
        when nothing is due. ``max_priority`` p takes only tasks with priority ≤ p
        (over budget, only urgent work runs); None takes any. The claim carries the
        task's notes, read in the same transaction."""
        ...

    async def set_run_process(
        self, run_id: int, *, pid: int, pgid: int, proc_start: str | None, workspace: str | None = None
    ) -> None:
        """Record the executor's process (group) on the run, for crash recovery, and
        the ``workspace`` its agent works in (None: keep what is recorded)."""
        ...

    async def set_executor(self, claim: Claim, executor: str) -> None:
        """Record the executor that runs ``claim``'s attempt on its run and, while the
        task is still active, on the task, in one transaction. The claim stored the
        configured default; a skill may choose another, known only once the task's
        skills are read."""
        ...

    async def renew_lease(self, task_id: int, *, worker: str, lease_until: int) -> bool:
        """Extend the lease of a task this worker holds; returns whether a cancel
        was requested. Raises ``InvalidTransition`` if the worker no longer holds it."""
        ...

    async def finish(self, claim: Claim, outcome: Outcome, status: TaskStatus, *, worker: str) -> Task:
        """Record the attempt's outcome and costs on its run and the task, and set
        the task to ``status`` (completed, failed or canceled) unless it was no longer
        active under this worker (the agent closed it itself): then only the run and
        the costs are recorded. A claim whose run is already recorded changes
        nothing (a replay never counts costs twice); the task is returned as is."""
        ...

    async def finish_and_claim(
        self,
        claim: Claim,
        outcome: Outcome,
        status: TaskStatus,
        *,
        worker: str,
        lease_ms: int,
        executor: str | None = None,
        max_priority: int | None = None,
    ) -> tuple[Task, Claim | None]:
        """``finish`` then ``claim_next`` in one transaction (one commit instead of
        two when the dispatcher runs tasks back to back). Returns the finished task
        and the next claim (None when nothing is due). Raises as those two do."""
        ...

    async def requeue(self, claim: Claim, outcome: Outcome, *, retry_at: int, count_attempt: bool, worker: str) -> Task:
        """Record the attempt and put the task back to pending, due at ``retry_at``.
        ``count_attempt`` False gives the attempt back (usage limits). If a cancel was
        requested meanwhile, the task becomes canceled instead. A task no longer
        active under this worker keeps its status, and a claim whose run is already
        recorded changes nothing (as in ``finish``)."""
        ...

    async def hold_for_approval(self, claim: Claim, *, worker: str) -> Task:
        """Put a claimed task that needs approval back unrun, in one transaction:
        active → blocked with approval pending, its open run removed and its attempt
        given back. A task whose cancel was requested since the claim is canceled
        instead. Raises ``InvalidTransition`` if this worker no longer holds it or the
        claim's run is no longer open (a stale claim)."""
        ...

    async def hold_for_review(self, claim: Claim, outcome: Outcome, *, worker: str) -> Task:
        """As ``finish``, but the task is held for a person's review: blocked with
        review ``pending`` (canceled if a cancel was requested meanwhile). One
        transaction; a task the agent closed itself keeps its status."""
        ...

    async def release_unrun(self, claim: Claim, *, worker: str, retry_at: int) -> Task:
        """Put a claimed task back to pending unrun, due at ``retry_at`` (epoch ms), in
        one transaction: its open run removed and its attempt given back; canceled
        instead if a cancel was requested since the claim. Raises
        ``InvalidTransition`` if this worker no longer holds it or the claim is stale."""
        ...

    async def origin_of(self, task_id: int) -> str:
        """The source of the root of the task's parent chain (the task's own source
        when it has no parent). Raises ``TaskNotFound``."""
        ...

    async def spend_since(self, since_ms: int) -> float:
        """USD the agent CLIs reported (``cost_usd``) over runs finished at or after
        ``since_ms``, pruned tasks' runs included (hour granularity, as in
        ``cost_rollup``); 0.0 when none."""
        ...

    async def active_tasks(self) -> list[Task]:
        """Every active task (for crash recovery and status)."""
        ...

    async def open_runs(self) -> list[Run]:
        """Runs not yet finished, oldest first: the attempt in flight, or attempts a
        dead dispatcher left behind (crash recovery)."""
        ...

    async def recover(self, run_id: int, outcome: Outcome, *, status: TaskStatus, retry_at: int | None = None) -> Task:
        """Close a run left open by a dead dispatcher and settle its task, in one
        transaction: the run gets ``outcome``; the task, if still active under the
        run's worker, becomes ``status`` (``pending`` due at ``retry_at`` with the
        attempt counted, or ``failed``/``canceled``). A task its agent closed keeps
        its status and only loses the claim. A run already finished is left alone
        (idempotent). Returns the task; raises ``InputError`` for a missing run, a
        ``status`` that is not pending/failed/canceled, or pending without ``retry_at``.
        """
        ...


class SensorStore(Protocol):
    """Sensor state and the tasks a sensor run inserts."""

    async def sensor_states(self) -> list[SensorState]:
        """Every sensor's state, by name."""
        ...

    async def sensor_state(self, name: str) -> SensorState | None:
        """One sensor's state; None when it has never run nor been enabled/disabled."""
        ...

    async def record_sensor_run(
        self,
        name: str,
        run: SensorRun,
        tasks: Sequence[NewTask],
        state: Mapping[str, object] | None,
    ) -> BatchResult:
        """Insert a sensor run's tasks and update its state in one transaction, so a
        cursor is saved only together with the tasks it produced. ``state`` None keeps
        the stored one."""
        ...

    async def set_sensor_enabled(self, name: str, enabled: bool) -> None:
        """Enable or disable a sensor (creates its state row if needed)."""
        ...


class LoopState(Protocol):
    """The loop's key/value state: the gate, the guard's counters, heartbeats."""

    async def loop_values(self) -> dict[str, object]:
        """Every loop-state key with its JSON value."""
        ...

    async def set_loop_values(self, values: Mapping[str, object]) -> None:
        """Write several loop-state keys (JSON values) in one transaction."""
        ...

    async def replace_loop_value(self, key: str, expected: object, value: object) -> bool:
        """Write ``value`` under ``key`` only if its current JSON value equals
        ``expected`` (None: the key is absent), atomically; returns whether it wrote.
        Lets an automatic change (a gate resuming itself) never undo a person's."""
        ...


class Maintenance(Protocol):
    """Backups, the write-ahead log, retention and closing."""

    async def backup(self, target: Path) -> None:
        """Write a consistent copy of the database to ``target`` (online backup)."""
        ...

    async def checkpoint(self, *, truncate: bool = False) -> tuple[int, int]:
        """Copy the write-ahead log into the database without waiting for readers
        (passive). Returns (pages in the log, pages copied); fewer copied than
        logged means a reader still holds an older snapshot. SQLite-specific in
        spirit; another backend returns (0, 0).

        ``truncate`` also empties the log file: it waits up to a short bound
        (``sqlite_db.TRUNCATE_WAIT_MS``) for the readers of older snapshots to
        finish, holding off other writers meanwhile, then copies every page and
        cuts the file to zero bytes, returning (0, 0). A reader still there at the
        bound leaves the log as a passive checkpoint would (the counts say so).
        Under readers that never pause, only this bounds the log."""
        ...

    async def prune(
        self,
        *,
        finished_before_ms: int,
        events_before_ms: int | None = None,
        batch_size: int = 200,
        max_batches: int | None = None,
        dry_run: bool = False,
        fold_before_ms: int | None = None,
        costs_before_ms: int | None = None,
        keys_before_ms: int | None = None,
    ) -> PruneResult:
        """Delete finished tasks (completed, failed, canceled) last updated before
        ``finished_before_ms`` (epoch ms), with their runs, events, notes and
        dependency rows. Never deleted: an open task; a task a dispatcher still
        holds (``claimed_by`` set, or a run not yet recorded); a task that still
        has a child (any status: its chain stays whole, so ``origin_of`` and the
        SENSOR roll-up keep working); a task another remaining task depends on. A parent or a
        dependency freed by the tasks deleted is deleted in the same call (unless
        ``max_batches`` stops it first).

        Before a task goes, its runs' spend and tokens are added to the cost
        archive (UTC hour x skills x source x model x sensor origin), so
        ``cost_rollup`` and ``spend_since`` keep their totals; its source key stays
        used (retired now, by the store's clock), so a later ``ever`` add of that
        key is still refused.

        Then what pruned tasks left behind is bounded, each step in batches too:
        ``costs_before_ms`` (None: keep) deletes archive rows that ended at or
        before it; ``fold_before_ms`` (None: no fold) folds the archive's hour rows
        of every UTC day that ended at or before the start of the day holding it
        into one row per day and group, keeping every sum (a roll-up or spend
        window that starts on a day boundary, or after that day line, is as exact
        as before; one starting inside a folded day counts that whole day);
        ``keys_before_ms`` (None: keep) deletes keys retired before it, after which
        an ``ever`` add may use such a key again.

        ``events_before_ms`` (None: keep) also deletes older audit rows of the
        tasks that stay. Works in batches of at most ``batch_size`` tasks (or audit
        rows), each its own short transaction: a batch is atomic, the whole prune
        is not, and other writers get the lock between batches. ``max_batches``
        None runs until nothing is left. Idempotent: a second call finds nothing.
        ``dry_run`` deletes nothing and reports what a full prune would delete
        (archive rows and keys counted as they are before the prune).

        Returns the counts and the transcript paths of the deleted runs (the
        caller deletes those files). Raises ``InputError`` for a ``batch_size`` or
        ``max_batches`` below 1, ``StoreBusy``, ``StoreError``.
        """
        ...

    async def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""
        ...


class Store(TaskWriter, TaskChanges, TaskReader, DispatchStore, SensorStore, LoopState, Maintenance, Protocol):
    """Every role: what the composition roots (the CLI, the daemon, the TUI) open
    and pass down; a part that needs one role asks for that role's protocol."""
