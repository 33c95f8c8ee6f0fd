"""The task side of the store, written once for every backend: adding tasks (dedup,
flood limits), the conditional writes of people, scripts and the agent, and the
reads of tasks and their history.

``Tasks`` is blocking: a one-shot command calls it on its own connection; the async
stores run each of its calls whole in their worker thread (``AsyncTasks``). Every
method is one unit of work (one ``Engine`` read or write); the guarantees are those
of the ``vigil.store.Store`` protocol, whose docstrings they keep.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from vigil.caps import ANSWER_CHARS, NOTE_CHARS, refuse_over
from vigil.clock import Clock
from vigil.codework import Worktree
from vigil.config import LimitsSettings
from vigil.durations import check_time_ms
from vigil.errors import DuplicateOpenTask, FloodLimited, InputError, InvalidTransition, Refused, TaskNotFound
from vigil.fate import after_request
from vigil.faults import crash_point
from vigil.models import (
    MAX_ID,
    MAX_PRIORITY,
    MAX_RETRIES,
    MIN_PRIORITY,
    AddResult,
    Attention,
    BatchResult,
    CostGroup,
    CostRow,
    DedupScope,
    LineResult,
    NewTask,
    Note,
    Run,
    Task,
    TaskEvent,
    TaskStatus,
    model_name_problem,
)
from vigil.store.limits import FloodGate, Refusal, agent_priority
from vigil.store.rows import Row, choices_to_text, row_to_note, row_to_run, row_to_task_event, task_from_row
from vigil.store.sql.costs import COST_ROLLUP
from vigil.store.sql.runs import CLOSE_RUN, GET_RUN, LIST_RUNS, NEXT_DUE_AT
from vigil.store.sql.tasks import (
    ADD_DEP,
    ADD_EVENT,
    ADD_NOTE,
    ADD_TASK,
    ADD_TASK_EVER,
    ANSWER,
    APPROVE,
    APPROVE_REVIEW,
    ASK,
    ATTENTION,
    CANCEL,
    CLOSE_TASK,
    COUNT_BY_STATUS,
    DEFER,
    DEFER_BY,
    DEPENDENCIES,
    EVENTS_AFTER,
    GET_TASK,
    HOLDER_OF_KEY,
    LIST_EVENTS,
    LIST_NOTES,
    REJECT,
    REJECT_REVIEW,
    RELEASE_SAVEPOINT,
    REQUEST_RETRY,
    RETRY,
    ROLLBACK_TO_SAVEPOINT,
    SAVEPOINT,
    SET_PRIORITY,
    TASK_FOR_UPDATE,
    UNBLOCK,
    list_tasks,
    search_tasks,
)
from vigil.store.sql.window import QUEUE
from vigil.store.transaction import Engine, Sql, Tx
from vigil.store.views import read_history, read_window
from vigil.task_query import TaskQuery, TaskWindow

if TYPE_CHECKING:
    from vigil.redaction import Redactor

NO_UPPER_ID = 2**62  # "no upper bound" for keyset paging
AGENT_ACTOR = "agent"  # who writes from inside a run (the CLI's actor() and the MCP server)


def task_of(tx: Tx, row: Row) -> Task:
    return task_from_row(row, tx.loads(row["skills"]))


def require_task(tx: Tx, task_id: int, *, lock: bool = False) -> Row:
    """The task's row, locked for the rest of a write transaction with ``lock``
    (PostgreSQL; SQLite's writers are serialised anyway); raises ``TaskNotFound``."""
    row = tx.one(TASK_FOR_UPDATE if lock else GET_TASK, {"id": task_id})
    if row is None:
        raise TaskNotFound(task_id)
    return row


def require_open_run(tx: Tx, run_id: int, task_id: int, *, closing: bool = False) -> None:
    """Refuse (``Refused``) a write made on behalf of run ``run_id`` unless, read in
    the writing transaction, the run is open and is task ``task_id``'s, and, when
    ``closing``, has not closed its task yet (the first close of a run decides). The
    task's row is locked first: a dispatcher recording the run waits for this write,
    or this write sees it recorded."""
    require_task(tx, task_id, lock=True)
    run = tx.one(GET_RUN, {"id": run_id})
    if run is None or run["task_id"] != task_id:
        raise Refused(f"run #{run_id} is not a run of task #{task_id}")
    if run["finished_at"] is not None:
        raise Refused(f"run #{run_id} has ended; its agent can no longer change task #{task_id}")
    if closing and run["agent_status"] is not None:
        decided = f"{run['agent_status']}: {run['summary']}"
        raise Refused(f"run #{run_id} already closed task #{task_id} as {decided}; the first close decides")


def check_new_task(new: NewTask) -> None:
    """Refuse what the schema cannot say clearly, before any insert (``InputError``):
    whoever asks (a person, a sensor, the agent), a time is in the range Vigil can
    show, a count or id fits the database's integers, a model name is no flag."""
    if not new.subject.strip():
        raise InputError("subject must not be empty")
    if not MIN_PRIORITY <= new.priority <= MAX_PRIORITY:
        raise InputError(f"priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {new.priority}")
    if new.max_retries is not None and not 0 <= new.max_retries <= MAX_RETRIES:
        raise InputError(f"max retries must be 0 to {MAX_RETRIES}, not {new.max_retries}")
    if new.dedup is DedupScope.EVER and new.source_key is None:
        raise InputError("dedup scope 'ever' needs a source key")
    if new.scheduled_for is not None:
        check_time_ms(new.scheduled_for, "the due time")
    for task_id in ([] if new.parent_id is None else [new.parent_id]) + list(new.depends_on):
        if not 0 < task_id <= MAX_ID:
            raise InputError(f"task ids are integers from 1 to {MAX_ID}, not {task_id}")
    if new.model is not None and (problem := model_name_problem(new.model)) is not None:
        raise InputError(problem)


def insert_task(
    tx: Tx, new: NewTask, now: int, actor: str, max_retries: int, *, flood: FloodGate | None = None
) -> int | Refusal | None:
    """Insert one task and its dependencies: its id, None when the source key
    deduplicated it, or the ``Refusal`` of a flood limit (counted, nothing added).
    Raises ``InputError``, or ``TaskNotFound`` for a missing parent or dependency."""
    check_new_task(new)
    for task_id in ([] if new.parent_id is None else [new.parent_id]) + list(new.depends_on):
        require_task(tx, task_id)
    new, _ = agent_priority(tx, new, actor, None if flood is None else flood.limits)
    params = {
        "subject": new.subject,
        "description": new.description,
        "skills": tx.dumps(list(new.skills)),
        "priority": new.priority,
        "source": new.source,
        "source_key": new.source_key,
        "dedup": str(new.dedup),
        "parent_id": new.parent_id,
        "scheduled_for": now if new.scheduled_for is None else new.scheduled_for,
        "now": now,
        "actor": actor,
        "max_retries": max_retries if new.max_retries is None else new.max_retries,
        "approval": new.requires_approval,
        "model": new.model,
        "workdir": new.workdir,
        "max_cost_usd": new.max_cost_usd,
        "code": None if new.code is None else new.code.to_json(),
        "github": None if new.github is None else new.github.to_json(),
    }
    sql = ADD_TASK if new.dedup is DedupScope.OPEN else ADD_TASK_EVER
    refusal = None if flood is None else flood.check(tx, new)
    if flood is not None and refusal is not None:
        # A task its key deduplicates is "already there", not refused: find out by
        # inserting it and undoing that (only on this rare path).
        tx.run(SAVEPOINT)
        row = tx.one(sql, params)
        tx.run(ROLLBACK_TO_SAVEPOINT)
        tx.run(RELEASE_SAVEPOINT)
        if row is None:
            return None
        flood.record(tx, new, refusal)
        return refusal
    row = tx.one(sql, params)
    if row is None:
        return None
    if flood is not None:
        flood.added(new)
    task_id = int(row["id"])
    tx.many(ADD_DEP, [{"task_id": task_id, "depends_on": dep} for dep in new.depends_on])
    return task_id


def insert_batch(
    tx: Tx, news: Sequence[NewTask], now: int, actor: str, *, max_retries: int, limits: LimitsSettings | None
) -> BatchResult:
    """Insert ``news`` in the caller's transaction; duplicates count as ignored and
    flood refusals as rejected."""
    flood = None if limits is None else FloodGate(limits, now)
    created = [insert_task(tx, new, now, actor, max_retries, flood=flood) for new in news]
    ids = tuple(task_id for task_id in created if isinstance(task_id, int))
    rejected = sum(isinstance(task_id, Refusal) for task_id in created)
    return BatchResult(ids, len(news) - len(ids) - rejected, rejected)


def merge_event(merged: Worktree) -> dict[str, str | None]:
    """The audit row of an approval's merge: the branch, the commit the base then
    pointed to (the branch's tip, for ``branch``), and how."""
    how = "left for a pull request" if merged.merge == "branch" else f"{merged.merge} into {merged.base}"
    return {"kind": "merge", "from_value": merged.branch, "to_value": merged.merged, "detail": how}


def _refused(tx: Tx, task_id: int, action: str) -> InvalidTransition:
    return InvalidTransition(task_id, require_task(tx, task_id)["status"], action)


def _not_awaiting_approval(tx: Tx, task_id: int, action: str) -> InvalidTransition:
    status = require_task(tx, task_id)["status"]
    return InvalidTransition(task_id, f"{status} and not awaiting approval or review", action)


class Tasks:
    """The task methods of ``Store``, blocking, over one backend's ``Engine``.

    What the agent writes back from a run (actor ``agent``: a close summary, a note,
    a follow-up's subject and description) is masked with ``agent_secrets`` before it
    is stored, however it arrives (``vigil task …`` inside the run, the MCP server):
    the agent can print any secret it was given. The secrets are those of this
    process's environment (``vigil.redaction``) and the names in ``pass_env``
    (``[dispatch] pass_env``): inside a run that environment is the one the
    dispatcher gave the agent, which its commands and its MCP server inherit.
    """

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        default_max_retries: int,
        limits: LimitsSettings | None = None,
        *,
        pass_env: Sequence[str] = (),
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._default_max_retries = default_max_retries
        self._limits = limits
        self._pass_env = tuple(pass_env)
        self._agent_secrets: Redactor | None = None  # read from the environment at the first agent write

    def _masked(self, text: str, actor: str) -> str:
        """``text`` as stored: masked when the agent wrote it."""
        if actor != AGENT_ACTOR:
            return text
        if self._agent_secrets is None:
            from vigil.redaction import Redactor  # only inside a run: people's commands skip logging's import

            self._agent_secrets = Redactor.from_env(os.environ, self._pass_env)
        return self._agent_secrets.text(text)

    # --- adding -------------------------------------------------------------------
    def add_task(self, new: NewTask, *, actor: str = "human", run_id: int | None = None) -> AddResult:
        """Add one task, or report the task that already holds its source key.

        Dedup is decided by the database in the same statement as the insert. An
        agent's task is held to its parent's priority and ``[limits]
        agent_priority_floor`` in the same transaction (``AddResult.clamped`` says so).
        Raises ``TaskNotFound`` for a missing parent or dependency, ``InputError``
        for a dependency on itself; with ``run_id`` (a follow-up its agent adds),
        ``Refused`` unless that run is open and of the new task's parent.
        """
        now = self._clock.now_ms()
        if actor == AGENT_ACTOR:
            new = replace(
                new, subject=self._masked(new.subject, actor), description=self._masked(new.description, actor)
            )

        def body(tx: Tx) -> AddResult | Refusal:
            if run_id is not None:  # a follow-up: its parent is the run's task
                require_open_run(tx, run_id, new.parent_id or 0)
            flood = None if self._limits is None else FloodGate(self._limits, now)
            asked, clamped = agent_priority(tx, new, actor, self._limits)
            task_id = insert_task(tx, asked, now, actor, self._default_max_retries, flood=flood)
            if isinstance(task_id, Refusal):
                return task_id  # committed with its count; raised below
            if task_id is not None:
                return AddResult(task_id, True, clamped)
            holder = tx.one(HOLDER_OF_KEY, {"key": new.source_key})
            return AddResult(None if holder is None or holder["id"] is None else int(holder["id"]), False)

        result = self._engine.write(body)
        if isinstance(result, Refusal):
            raise FloodLimited(f"task not added: {result.reason}")
        return result

    def add_tasks(self, news: Sequence[NewTask], *, actor: str) -> BatchResult:
        """Add many tasks in one transaction; duplicates are counted as ignored."""
        now = self._clock.now_ms()

        def body(tx: Tx) -> BatchResult:
            result = insert_batch(tx, news, now, actor, max_retries=self._default_max_retries, limits=self._limits)
            crash_point("sensor-batch")
            return result

        return self._engine.write(body)

    def add_each(self, news: Sequence[NewTask], *, actor: str) -> list[LineResult]:
        """Add many tasks in one transaction and say what became of each, in order:
        created, existing (its key's holder), or refused (a flood limit, counted as
        ``add_tasks`` counts it; a missing parent or dependency). Raises
        ``InputError`` for a task that is not valid (nothing is added then)."""
        now = self._clock.now_ms()

        def body(tx: Tx) -> list[LineResult]:
            flood = None if self._limits is None else FloodGate(self._limits, now)
            results = []
            for new in news:
                try:
                    # A missing parent or dependency is found before anything of
                    # this task is written: the batch goes on without it.
                    task_id = insert_task(tx, new, now, actor, self._default_max_retries, flood=flood)
                except TaskNotFound as err:
                    results.append(LineResult("refused", None, str(err)))
                    continue
                if isinstance(task_id, Refusal):
                    results.append(LineResult("refused", None, task_id.reason))
                elif task_id is not None:
                    results.append(LineResult("created", task_id))
                else:
                    holder = tx.one(HOLDER_OF_KEY, {"key": new.source_key})
                    held = None if holder is None or holder["id"] is None else int(holder["id"])
                    results.append(LineResult("existing", held))
            return results

        return self._engine.write(body)

    # --- reading ------------------------------------------------------------------
    def task_window(
        self, query: TaskQuery, *, offset: int = 0, limit: int = 100, recent_since_ms: int | None = None
    ) -> TaskWindow:
        """One page of the tasks ``query`` asks for, in its order: the rows from
        ``offset`` (0-based; one at or past the end gives the last page), at most
        ``limit``, with how many match in all and what the queue's header shows
        (counts per state, the running tasks, the next task and due time, and, with
        ``recent_since_ms``, the last few completed or failed since then, the latest
        finish first). One read transaction: the page, the total and the counts
        agree. Filters and sorts run in the database over indexed rows (see
        ``vigil.store.sql.window`` for what each costs). Raises ``InputError`` for a
        negative offset or a limit below 1."""
        if offset < 0 or limit < 1:
            raise InputError(f"a window needs offset >= 0 and limit >= 1, not {offset} and {limit}")
        now = self._clock.now_ms()
        return self._engine.snapshot(
            lambda tx: read_window(tx, query, now_ms=now, offset=offset, limit=limit, recent_since_ms=recent_since_ms)
        )

    def finished_tasks(self, text: str = "", *, before: tuple[int, int] | None = None, limit: int = 100) -> list[Task]:
        """Completed, failed and canceled tasks, the latest finish first (then the
        higher id), keyset-paged: pass the last row's ``(completed_at, id)`` as
        ``before`` for the next page. ``text`` non-empty keeps tasks whose subject,
        description, source or result summary contains it (case-insensitive for
        ASCII); a rare match over a long history reads until a page is found."""
        return self._engine.read(lambda tx: read_history(tx, text, before=before, limit=limit))

    def get_task(self, task_id: int) -> Task:
        """The task; raises ``TaskNotFound``."""
        return self._engine.read(lambda tx: task_of(tx, require_task(tx, task_id)))

    def list_tasks(
        self, *, statuses: Collection[TaskStatus] | None = None, limit: int = 50, before_id: int | None = None
    ) -> list[Task]:
        """Tasks newest first (by id), keyset-paged: pass the last id seen as
        ``before_id`` for the next page. ``statuses`` None means every status."""
        params = {"before_id": NO_UPPER_ID if before_id is None else before_id, "limit": limit}
        wanted = list(statuses or TaskStatus)
        return self._engine.read(lambda tx: [task_of(tx, r) for r in tx.all(list_tasks(wanted), params)])

    def search_tasks(
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
        wanted = list(statuses or TaskStatus)
        params = {
            "statuses": [str(s) for s in wanted],
            "before_id": NO_UPPER_ID if before_id is None else before_id,
            "pattern": "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",
            "limit": limit,
        }
        return self._engine.read(lambda tx: [task_of(tx, r) for r in tx.all(search_tasks(wanted), params)])

    def queue(self, *, limit: int = 200) -> list[Task]:
        """Open tasks in the order the dispatcher will take them: active first, then
        due pending tasks by (priority, scheduled_for, id), then pending tasks that
        wait (not yet due, or on a dependency) by due time, then blocked tasks."""
        params = {"now": self._clock.now_ms(), "limit": limit}
        return self._engine.read(lambda tx: [task_of(tx, r) for r in tx.all(QUEUE, params)])

    def count_by_status(self) -> dict[TaskStatus, int]:
        """How many tasks have each status (every status present, zeros included).
        O(1): kept by triggers, not counted."""
        rows = self._engine.read(lambda tx: tx.all(COUNT_BY_STATUS))
        counts = dict.fromkeys(TaskStatus, 0)
        counts.update({TaskStatus(r["status"]): int(r["n"]) for r in rows})
        return counts

    def next_due_at(self) -> int | None:
        """Earliest ``scheduled_for`` of a pending task with no unfinished
        dependency; None when there is none."""
        row = self._engine.read(lambda tx: tx.one(NEXT_DUE_AT))
        return None if row is None or row["m"] is None else int(row["m"])

    def attention(self, since_ms: int) -> Attention:
        """How many tasks await review and approval, and how many runs finished
        since ``since_ms`` (epoch ms) had actions denied to their agent. One read."""
        row = self._engine.read(lambda tx: tx.one(ATTENTION, {"since": since_ms}))
        assert row is not None  # an aggregate always answers
        return Attention(int(row["awaiting_review"]), int(row["awaiting_approval"]), int(row["denied_runs"]))

    def get_run(self, run_id: int) -> Run | None:
        """The run with id ``run_id``; None when there is none (never recorded, or
        pruned with its task)."""
        row = self._engine.read(lambda tx: tx.one(GET_RUN, {"id": run_id}))
        return None if row is None else row_to_run(row)

    def list_runs(self, task_id: int) -> list[Run]:
        """The task's attempts, oldest first."""
        return self._engine.read(lambda tx: [row_to_run(r) for r in tx.all(LIST_RUNS, {"id": task_id})])

    def list_events(self, task_id: int) -> list[TaskEvent]:
        """The task's audit trail, oldest first."""
        return self._engine.read(lambda tx: [row_to_task_event(r) for r in tx.all(LIST_EVENTS, {"id": task_id})])

    def events_after(
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

        def body(tx: Tx) -> list[TaskEvent]:
            params = {
                "after": after_id,
                "since": since_ms,
                "task": task_id,
                "kinds": tx.array(list(kinds)) if kinds else None,
                "limit": limit,
            }
            return [row_to_task_event(r) for r in tx.all(EVENTS_AFTER, params)]

        return self._engine.read(body)

    def list_notes(self, task_id: int) -> list[Note]:
        """The task's notes, oldest first."""
        return self._engine.read(lambda tx: [row_to_note(r) for r in tx.all(LIST_NOTES, {"id": task_id})])

    def dependencies(self, task_id: int) -> list[int]:
        """Ids of the tasks this task depends on."""
        rows = self._engine.read(lambda tx: tx.all(DEPENDENCIES, {"id": task_id}))
        return [int(r["depends_on"]) for r in rows]

    def cost_rollup(self, *, since_ms: int, by: CostGroup) -> list[CostRow]:
        """Spend of runs finished at or after ``since_ms``, grouped, largest cost
        first (by day: newest day first).

        Runs of pruned tasks still count (``prune`` folds them into an hourly
        archive first), so totals do not change when a prune runs. An archived hour
        counts whole when ``since_ms`` falls inside it: for the runs of pruned tasks
        the window starts at the top of that UTC hour. ``tasks`` counts each task
        once per group, archived or not."""
        rows = self._engine.read(lambda tx: tx.all(COST_ROLLUP[by], {"since": since_ms}))
        return [
            CostRow(
                key=str(r["key"]),
                runs=int(r["runs"]),
                tasks=int(r["tasks"]),
                cost_usd=float(r["cost_usd"]),
                api_cost_usd=float(r["api_cost_usd"]),
                tokens_in=int(r["tokens_in"]),
                tokens_out=int(r["tokens_out"]),
                cache_read_tokens=int(r["cache_read_tokens"]),
                cache_write_tokens=int(r["cache_write_tokens"]),
            )
            for r in rows
        ]

    # --- changing -----------------------------------------------------------------
    def _change(self, task_id: int, action: str, sql: Sql, run_id: int | None = None, **params: Any) -> Task:
        """Run one conditional ``UPDATE … WHERE id AND status IN (allowed) RETURNING *``;
        if no row matched, raise ``InvalidTransition`` naming the status that refused
        it (or ``TaskNotFound``). With ``run_id``, first ``require_open_run``."""
        values = {**params, "id": task_id, "now": self._clock.now_ms()}

        def body(tx: Tx) -> Task:
            if run_id is not None:
                require_open_run(tx, run_id, task_id)
            row = tx.one(sql, values)
            if row is None:
                raise _refused(tx, task_id, action)
            return task_of(tx, row)

        try:
            return self._engine.write(body)
        except DuplicateOpenTask:
            raise DuplicateOpenTask(f"task #{task_id}: another open task already has its source key") from None

    def cancel(self, task_id: int, *, actor: str) -> Task:
        """Pending/blocked → canceled. An active task only gets ``cancel_requested``
        (the dispatcher honours it); its status does not change."""
        return self._change(task_id, "cancel", CANCEL, actor=actor)

    def set_priority(self, task_id: int, priority: int, *, actor: str) -> Task:
        """Change the priority of a pending or blocked task."""
        if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
            raise InputError(f"priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {priority}")
        sql = SET_PRIORITY
        return self._change(task_id, "change its priority", sql, priority=priority, actor=actor)

    def shift_priority(self, task_id: int, by: int, *, actor: str) -> tuple[int, Task]:
        """Move a pending, blocked or waiting task's priority ``by`` steps (negative:
        more urgent) from its stored one, kept within the range, in one transaction
        (two people pressing + at once move it twice). Returns the priority it had and
        the task (unchanged at the end of the range). Raises ``InvalidTransition``."""
        values = {"id": task_id, "now": self._clock.now_ms(), "actor": actor}

        def body(tx: Tx) -> tuple[int, Task]:
            task = task_of(tx, require_task(tx, task_id, lock=True))
            if task.status not in (TaskStatus.PENDING, TaskStatus.BLOCKED, TaskStatus.WAITING):  # SQL_SET_PRIORITY's
                raise InvalidTransition(task_id, task.status, "change its priority")
            wanted = min(MAX_PRIORITY, max(MIN_PRIORITY, task.priority + by))
            if wanted == task.priority:
                return task.priority, task
            row = tx.one(SET_PRIORITY, {**values, "priority": wanted})
            assert row is not None  # the row is locked and its status allows it
            return task.priority, task_of(tx, row)

        return self._engine.write(body)

    def defer(self, task_id: int, until_ms: int, *, actor: str) -> Task:
        """Set ``scheduled_for`` of a pending or blocked task."""
        check_time_ms(until_ms, "the new due time")
        return self._change(task_id, "defer it", DEFER, until=until_ms, actor=actor)

    def defer_by(self, task_id: int, by_ms: int, *, actor: str) -> Task:
        """Make a pending or blocked task due ``by_ms`` later than it is due now (a
        task already due: than now), in one statement. Raises ``InputError`` for
        ``by_ms`` ≤ 0."""
        if by_ms <= 0:
            raise InputError(f"a deferral must move a task later, not by {by_ms} ms")
        return self._change(task_id, "defer it", DEFER_BY, by=by_ms, actor=actor)

    def retry(self, task_id: int, *, actor: str) -> Task:
        """Failed/canceled → pending, due now, attempts reset; runs, notes and
        events are kept. Raises ``DuplicateOpenTask`` if another open task holds
        the source key meanwhile."""
        return self._change(task_id, "retry it", RETRY, actor=actor)

    def close_task(
        self, task_id: int, status: TaskStatus, summary: str, *, actor: str, run_id: int | None = None
    ) -> Task:
        """Close an open task as completed, failed or blocked with a summary (the
        agent closing its own task). An active task keeps its claim so the
        dispatcher still records the run; its status is then kept. With ``run_id``
        (the run the agent closes it from, while open) that run keeps what the agent
        said: the status and the summary, in the same transaction, and the call is
        ``Refused`` unless that run is open and has not closed the task already."""
        if status not in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.BLOCKED):
            raise InputError(f"a task can be closed as completed, failed or blocked, not {status}")
        values = {
            "id": task_id,
            "status": str(status),
            "summary": self._masked(summary, actor),
            "actor": actor,
            "run_id": run_id,
            "now": self._clock.now_ms(),
        }

        def body(tx: Tx) -> Task:
            if run_id is not None:
                require_open_run(tx, run_id, task_id, closing=True)
            row = tx.one(CLOSE_TASK, values)
            if row is None:
                raise _refused(tx, task_id, f"close it as {status}")
            if run_id is not None:
                tx.run(CLOSE_RUN, values)
            return task_of(tx, row)

        return self._engine.write(body)

    def request_retry(
        self, task_id: int, retry_at: int, summary: str, *, actor: str, run_id: int | None = None
    ) -> Task:
        """An active task asks to be tried again at ``retry_at`` (epoch ms): pending,
        due then, its attempt counted (the claim counted it), the summary kept; with
        no retry left (``attempt_count > max_retries``) it fails for good instead,
        its summary "gave up after N attempts: …" (``vigil.fate.after_request``). The
        claim stays so the dispatcher still records the run; the status is then kept.
        With ``run_id`` that run keeps the request as what its agent said (``Refused``
        unless the run is open and has not closed the task already). One
        transaction, audited as a ``status`` event. Raises ``InvalidTransition`` for
        a task that is not active or whose cancel was requested, ``TaskNotFound``."""
        check_time_ms(retry_at, "the retry time")
        summary = self._masked(summary, actor)
        now = self._clock.now_ms()

        def body(tx: Tx) -> Task:
            if run_id is not None:
                require_open_run(tx, run_id, task_id, closing=True)
            task = task_of(tx, require_task(tx, task_id, lock=True))
            if task.status is not TaskStatus.ACTIVE or task.cancel_requested:
                status = "active with a cancel requested" if task.cancel_requested else str(task.status)
                raise InvalidTransition(task_id, status, "ask for a retry (only a running task can)")
            fate = after_request(task, retry_at, summary)
            params = {"id": task_id, "status": str(fate.status), "retry_at": fate.retry_at, "now": now}
            row = tx.one(REQUEST_RETRY, {**params, "summary": fate.summary, "actor": actor})
            assert row is not None  # the row is locked and active
            if run_id is not None:
                agent_said = {"id": task_id, "run_id": run_id, "status": str(TaskStatus.PENDING), "summary": summary}
                tx.run(CLOSE_RUN, agent_said)
            return task_of(tx, row)

        return self._engine.write(body)

    def ask(
        self, task_id: int, question: str, choices: Sequence[str] = (), *, actor: str, run_id: int | None = None
    ) -> Task:
        """The running task's agent asks a person ``question``, offering ``choices``
        (none: a free answer): stored on the task with the run that asked, any
        earlier answer cleared. The task stays active; when that run is recorded it
        becomes ``waiting``, the run ``asked`` (``vigil.fate``). One transaction.
        Raises ``InputError`` for an empty question or choice, ``InvalidTransition``
        for a task that is not running or whose cancel was requested, and with
        ``run_id`` (the asking run) ``Refused`` unless that run is open."""
        question = question.strip()
        if not question:
            raise InputError("a question must not be empty")
        listed = [choice.strip() for choice in choices]
        if any(not choice for choice in listed):
            raise InputError("a choice must not be empty")
        values = {
            "question": self._masked(question, actor),
            "choices": choices_to_text(self._masked(choice, actor) for choice in listed),
            "actor": actor,
        }
        action = "ask a question (only a running task can)"
        return self._change(task_id, action, ASK, run_id, **values)

    def answer(self, task_id: int, text: str, *, actor: str) -> Task:
        """A person answers the question of a ``waiting`` task: the answer is stored
        on the task and as a note by ``actor`` (``answer: …``), and the task is
        pending, due at once, its attempt count kept; one ``status`` event. One
        transaction. Raises ``InputError`` for an empty answer,
        ``InvalidTransition`` for a task not waiting for an answer."""
        text = text.strip()
        if not text:
            raise InputError("an answer must not be empty")
        refuse_over(text, ANSWER_CHARS, "the answer")
        values = {"id": task_id, "now": self._clock.now_ms(), "actor": actor, "answer": text}

        def body(tx: Tx) -> Task:
            row = tx.one(ANSWER, values)
            if row is None:
                raise _refused(tx, task_id, "answer it (only a task waiting for an answer can be answered)")
            tx.one(ADD_NOTE, {**values, "author": actor, "text": f"answer: {text}"})
            return task_of(tx, row)

        return self._engine.write(body)

    def unblock(self, task_id: int, note: str | None = None, *, actor: str) -> Task:
        """A ``blocked`` task (not one awaiting approval or review) back in the
        queue: pending, due at once, its attempt count kept; ``note`` (if any) stored
        first, by ``actor``; one ``status`` event. One transaction. Raises
        ``InputError`` for an empty note, ``InvalidTransition`` for a task in
        another state."""
        if note is not None and not note.strip():
            raise InputError("note text must not be empty")
        values = {"id": task_id, "now": self._clock.now_ms(), "actor": actor}

        def body(tx: Tx) -> Task:
            row = tx.one(UNBLOCK, values)
            if row is None:
                task = task_of(tx, require_task(tx, task_id))
                if task.awaiting_approval or task.awaiting_review:
                    waits = "approval" if task.awaiting_approval else "review"
                    raise InvalidTransition(task_id, f"awaiting {waits}", "unblock it (use approve or reject)")
                raise InvalidTransition(task_id, task.status, "unblock it (only a blocked task can be)")
            if note is not None:
                tx.one(ADD_NOTE, {**values, "author": actor, "text": note.strip()})
            return task_of(tx, row)

        return self._engine.write(body)

    def add_note(self, task_id: int, text: str, *, author: str, run_id: int | None = None) -> Note:
        """Attach a progress note to any task; with ``run_id`` (the run whose agent
        writes it), ``Refused`` unless that run is open and of this task. Raises
        ``InputError`` for an empty note or one past ``vigil.caps.NOTE_CHARS`` (the
        agent's are cut before)."""
        if not text.strip():
            raise InputError("note text must not be empty")
        refuse_over(text, NOTE_CHARS, "the note")
        params = {"id": task_id, "now": self._clock.now_ms(), "author": author, "text": self._masked(text, author)}

        def body(tx: Tx) -> Note:
            if run_id is None:
                require_task(tx, task_id)
            else:
                require_open_run(tx, run_id, task_id)
            row = tx.one(ADD_NOTE, params)
            assert row is not None
            return row_to_note(row)

        return self._engine.write(body)

    def approve(self, task_id: int, *, actor: str, merged: Worktree | None = None) -> Task:
        """A task awaiting approval (blocked, approval pending) → pending, approval
        ``approved``; a task awaiting review (blocked, review pending) → completed,
        review ``approved``, and ``merged`` (its worktree as the approval's merge left
        it: mode, commit) recorded on it with a ``merge`` audit row. One transaction,
        audited (``approval`` or ``review`` event). Raises ``InvalidTransition`` for a
        task awaiting neither, ``TaskNotFound``."""
        values = {
            "id": task_id,
            "now": self._clock.now_ms(),
            "actor": actor,
            "worktree": None if merged is None else merged.to_json(),
        }

        def body(tx: Tx) -> Task:
            # awaiting approval → pending (it runs); awaiting review → completed
            row = tx.one(APPROVE, values)
            if row is None:
                row = tx.one(APPROVE_REVIEW, values)
                if row is None:
                    raise _not_awaiting_approval(tx, task_id, "approve it")
                if merged is not None:
                    tx.run(ADD_EVENT, {**values, **merge_event(merged)})
            return task_of(tx, row)

        return self._engine.write(body)

    def reject(self, task_id: int, reason: str, *, actor: str) -> Task:
        """A task awaiting approval → canceled, approval ``rejected``, the reason in
        its summary and in the ``approval`` event; a task awaiting review → pending
        and due now, review ``rejected``, the reason a note by ``actor`` (so its next
        run's agent reads it), its attempt count kept. One transaction. Raises
        ``InputError`` for an empty reason, ``InvalidTransition`` for a task awaiting
        neither."""
        if not reason.strip():
            raise InputError("a rejection needs a reason")
        reason = reason.strip()
        values = {"id": task_id, "now": self._clock.now_ms(), "actor": actor, "summary": f"rejected: {reason}"}

        def body(tx: Tx) -> Task:
            row = tx.one(REJECT, values)  # awaiting approval → canceled
            if row is None:
                # awaiting review → back to the queue, the reason before its agent
                row = tx.one(REJECT_REVIEW, values)
                if row is None:
                    raise _not_awaiting_approval(tx, task_id, "reject it")
                tx.one(ADD_NOTE, {**values, "author": actor, "text": f"review: {reason}"})
            return task_of(tx, row)

        return self._engine.write(body)
