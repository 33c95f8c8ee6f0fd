"""The task side of the store, written once for every backend: adding tasks (dedup,
flood limits), the conditional writes of people, scripts and the agent, and the
reads of tasks and their history.

``Tasks`` is blocking: a one-shot command calls it on its own connection; the async
stores run each of its calls whole in their worker thread (``AsyncTasks``). Every
method is one unit of work (one ``Engine`` read or write); the guarantees are those
of the ``vigil.store.Store`` protocol, whose docstrings they keep.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from vigil.clock import Clock
from vigil.config import LimitsSettings
from vigil.errors import DuplicateOpenTask, FloodLimited, InputError, InvalidTransition, TaskNotFound
from vigil.faults import crash_point
from vigil.models import (
    MAX_PRIORITY,
    MIN_PRIORITY,
    AddResult,
    Attention,
    BatchResult,
    CostRow,
    DedupScope,
    LineResult,
    NewTask,
    Note,
    Run,
    Task,
    TaskEvent,
    TaskStatus,
)
from vigil.store import CostGroup
from vigil.store.limits import FloodGate, Refusal
from vigil.store.rows import Row, row_to_note, row_to_run, row_to_task_event, task_from_row
from vigil.store.transaction import Engine, Tx
from vigil.store.views import read_history, read_window
from vigil.task_query import TaskQuery, TaskWindow

NO_UPPER_ID = 2**62  # "no upper bound" for keyset paging


def task_of(tx: Tx, row: Row) -> Task:
    return task_from_row(row, tx.loads(row["skills"]))


def require_task(tx: Tx, task_id: int) -> Row:
    """The task's row; raises ``TaskNotFound``."""
    row = tx.one(tx.q.SQL_GET_TASK, {"id": task_id})
    if row is None:
        raise TaskNotFound(task_id)
    return row


def check_new_task(new: NewTask) -> None:
    """Refuse what the schema cannot say clearly, before any insert (``InputError``)."""
    if not new.subject.strip():
        raise InputError("subject must not be empty")
    if not MIN_PRIORITY <= new.priority <= MAX_PRIORITY:
        raise InputError(f"priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {new.priority}")
    if new.max_retries is not None and new.max_retries < 0:
        raise InputError(f"max retries must be 0 or more, not {new.max_retries}")
    if new.dedup is DedupScope.EVER and new.source_key is None:
        raise InputError("dedup scope 'ever' needs a source key")


def insert_task(
    tx: Tx, new: NewTask, now: int, actor: str, max_retries: int, *, flood: FloodGate | None = None
) -> int | Refusal | None:
    """Insert one task and its dependencies: its id, None when the source key
    deduplicated it, or the ``Refusal`` of a flood limit (counted, nothing added).
    Raises ``InputError``, or ``TaskNotFound`` for a missing parent or dependency."""
    check_new_task(new)
    for task_id in ([] if new.parent_id is None else [new.parent_id]) + list(new.depends_on):
        require_task(tx, task_id)
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
    }
    sql = tx.q.SQL_ADD_TASK if new.dedup is DedupScope.OPEN else tx.q.SQL_ADD_TASK_EVER
    refusal = None if flood is None else flood.check(tx, new)
    if flood is not None and refusal is not None:
        # A task its key deduplicates is "already there", not refused: find out by
        # inserting it and undoing that (only on this rare path).
        tx.run("SAVEPOINT flood_check")
        row = tx.one(sql, params)
        tx.run("ROLLBACK TO SAVEPOINT flood_check")
        tx.run("RELEASE SAVEPOINT flood_check")
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
    tx.many(tx.q.SQL_ADD_DEP, [{"task_id": task_id, "depends_on": dep} for dep in new.depends_on])
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


def _refused(tx: Tx, task_id: int, action: str) -> InvalidTransition:
    return InvalidTransition(task_id, require_task(tx, task_id)["status"], action)


def _not_awaiting_approval(tx: Tx, task_id: int, action: str) -> InvalidTransition:
    status = require_task(tx, task_id)["status"]
    return InvalidTransition(task_id, f"{status} and not awaiting approval or review", action)


class Tasks:
    """The task methods of ``Store``, blocking, over one backend's ``Engine``."""

    def __init__(
        self, engine: Engine, clock: Clock, default_max_retries: int, limits: LimitsSettings | None = None
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._default_max_retries = default_max_retries
        self._limits = limits

    # --- adding -------------------------------------------------------------------
    def add_task(self, new: NewTask, *, actor: str = "human") -> AddResult:
        now = self._clock.now_ms()

        def body(tx: Tx) -> AddResult | Refusal:
            flood = None if self._limits is None else FloodGate(self._limits, now)
            task_id = insert_task(tx, new, now, actor, self._default_max_retries, flood=flood)
            if isinstance(task_id, Refusal):
                return task_id  # committed with its count; raised below
            if task_id is not None:
                return AddResult(task_id, True)
            holder = tx.one(tx.q.SQL_HOLDER_OF_KEY, {"key": new.source_key})
            return AddResult(None if holder is None or holder["id"] is None else int(holder["id"]), False)

        result = self._engine.write(body)
        if isinstance(result, Refusal):
            raise FloodLimited(f"task not added: {result.reason}")
        return result

    def add_tasks(self, news: Sequence[NewTask], *, actor: str) -> BatchResult:
        now = self._clock.now_ms()

        def body(tx: Tx) -> BatchResult:
            result = insert_batch(tx, news, now, actor, max_retries=self._default_max_retries, limits=self._limits)
            crash_point("sensor-batch")
            return result

        return self._engine.write(body)

    def add_each(self, news: Sequence[NewTask], *, actor: str) -> list[LineResult]:
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
                    holder = tx.one(tx.q.SQL_HOLDER_OF_KEY, {"key": new.source_key})
                    held = None if holder is None or holder["id"] is None else int(holder["id"])
                    results.append(LineResult("existing", held))
            return results

        return self._engine.write(body)

    # --- reading ------------------------------------------------------------------
    def task_window(
        self, query: TaskQuery, *, offset: int = 0, limit: int = 100, recent_since_ms: int | None = None
    ) -> TaskWindow:
        if offset < 0 or limit < 1:
            raise InputError(f"a window needs offset >= 0 and limit >= 1, not {offset} and {limit}")
        now = self._clock.now_ms()
        return self._engine.snapshot(
            lambda tx: read_window(tx, query, now_ms=now, offset=offset, limit=limit, recent_since_ms=recent_since_ms)
        )

    def finished_tasks(self, text: str = "", *, before: tuple[int, int] | None = None, limit: int = 100) -> list[Task]:
        return self._engine.read(lambda tx: read_history(tx, text, before=before, limit=limit))

    def _tasks(self, sql: str, params: dict[str, Any] | None = None) -> list[Task]:
        return self._engine.read(lambda tx: [task_of(tx, r) for r in tx.all(sql, params)])

    def get_task(self, task_id: int) -> Task:
        return self._engine.read(lambda tx: task_of(tx, require_task(tx, task_id)))

    def list_tasks(
        self, *, statuses: Collection[TaskStatus] | None = None, limit: int = 50, before_id: int | None = None
    ) -> list[Task]:
        params = {"before_id": NO_UPPER_ID if before_id is None else before_id, "limit": limit}
        wanted = list(statuses or TaskStatus)
        return self._engine.read(lambda tx: [task_of(tx, r) for r in tx.all(tx.q.list_tasks_sql(wanted), params)])

    def search_tasks(
        self,
        text: str,
        *,
        statuses: Collection[TaskStatus] | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Task]:
        wanted = list(statuses or TaskStatus)
        params = {
            "statuses": [str(s) for s in wanted],
            "before_id": NO_UPPER_ID if before_id is None else before_id,
            "pattern": "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",
            "limit": limit,
        }
        return self._engine.read(lambda tx: [task_of(tx, r) for r in tx.all(tx.q.search_tasks_sql(wanted), params)])

    def queue(self, *, limit: int = 200) -> list[Task]:
        params = {"now": self._clock.now_ms(), "limit": limit}
        return self._engine.read(lambda tx: [task_of(tx, r) for r in tx.all(tx.q.SQL_QUEUE, params)])

    def count_by_status(self) -> dict[TaskStatus, int]:
        rows = self._engine.read(lambda tx: tx.all(tx.q.SQL_COUNT_BY_STATUS))
        counts = dict.fromkeys(TaskStatus, 0)
        counts.update({TaskStatus(r["status"]): int(r["n"]) for r in rows})
        return counts

    def next_due_at(self) -> int | None:
        row = self._engine.read(lambda tx: tx.one(tx.q.SQL_NEXT_DUE_AT))
        return None if row is None or row["m"] is None else int(row["m"])

    def attention(self, since_ms: int) -> Attention:
        row = self._engine.read(lambda tx: tx.one(tx.q.SQL_ATTENTION, {"since": since_ms}))
        assert row is not None  # an aggregate always answers
        return Attention(int(row["awaiting_review"]), int(row["awaiting_approval"]), int(row["denied_runs"]))

    def get_run(self, run_id: int) -> Run | None:
        row = self._engine.read(lambda tx: tx.one(tx.q.SQL_GET_RUN, {"id": run_id}))
        return None if row is None else row_to_run(row)

    def list_runs(self, task_id: int) -> list[Run]:
        return self._engine.read(lambda tx: [row_to_run(r) for r in tx.all(tx.q.SQL_LIST_RUNS, {"id": task_id})])

    def list_events(self, task_id: int) -> list[TaskEvent]:
        return self._engine.read(
            lambda tx: [row_to_task_event(r) for r in tx.all(tx.q.SQL_LIST_EVENTS, {"id": task_id})]
        )

    def events_after(
        self,
        after_id: int,
        *,
        since_ms: int | None = None,
        task_id: int | None = None,
        kinds: Collection[str] = (),
        limit: int = 500,
    ) -> list[TaskEvent]:
        def body(tx: Tx) -> list[TaskEvent]:
            params = {
                "after": after_id,
                "since": since_ms,
                "task": task_id,
                "kinds": tx.array(list(kinds)) if kinds else None,
                "limit": limit,
            }
            return [row_to_task_event(r) for r in tx.all(tx.q.SQL_EVENTS_AFTER, params)]

        return self._engine.read(body)

    def list_notes(self, task_id: int) -> list[Note]:
        return self._engine.read(lambda tx: [row_to_note(r) for r in tx.all(tx.q.SQL_LIST_NOTES, {"id": task_id})])

    def dependencies(self, task_id: int) -> list[int]:
        rows = self._engine.read(lambda tx: tx.all(tx.q.SQL_DEPENDENCIES, {"id": task_id}))
        return [int(r["depends_on"]) for r in rows]

    def cost_rollup(self, *, since_ms: int, by: CostGroup) -> list[CostRow]:
        rows = self._engine.read(lambda tx: tx.all(tx.q.SQL_COST_ROLLUP[by], {"since": since_ms}))
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
    def _change(self, task_id: int, action: str, sql: str, **params: Any) -> Task:
        """Run one conditional ``UPDATE … WHERE id AND status IN (allowed) RETURNING *``;
        if no row matched, raise ``InvalidTransition`` naming the status that refused
        it (or ``TaskNotFound``)."""
        values = {**params, "id": task_id, "now": self._clock.now_ms()}

        def body(tx: Tx) -> Task:
            row = tx.one(sql, values)
            if row is None:
                raise _refused(tx, task_id, action)
            return task_of(tx, row)

        try:
            return self._engine.write(body)
        except DuplicateOpenTask:
            raise DuplicateOpenTask(f"task #{task_id}: another open task already has its source key") from None

    def cancel(self, task_id: int, *, actor: str) -> Task:
        return self._change(task_id, "cancel", self._engine.q.SQL_CANCEL, actor=actor)

    def set_priority(self, task_id: int, priority: int, *, actor: str) -> Task:
        if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
            raise InputError(f"priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, not {priority}")
        sql = self._engine.q.SQL_SET_PRIORITY
        return self._change(task_id, "change its priority", sql, priority=priority, actor=actor)

    def defer(self, task_id: int, until_ms: int, *, actor: str) -> Task:
        return self._change(task_id, "defer it", self._engine.q.SQL_DEFER, until=until_ms, actor=actor)

    def defer_by(self, task_id: int, by_ms: int, *, actor: str) -> Task:
        if by_ms <= 0:
            raise InputError(f"a deferral must move a task later, not by {by_ms} ms")
        return self._change(task_id, "defer it", self._engine.q.SQL_DEFER_BY, by=by_ms, actor=actor)

    def retry(self, task_id: int, *, actor: str) -> Task:
        return self._change(task_id, "retry it", self._engine.q.SQL_RETRY, actor=actor)

    def close_task(self, task_id: int, status: TaskStatus, summary: str, *, actor: str) -> Task:
        if status not in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.BLOCKED):
            raise InputError(f"a task can be closed as completed, failed or blocked, not {status}")
        sql = self._engine.q.SQL_CLOSE_TASK
        return self._change(task_id, f"close it as {status}", sql, status=str(status), summary=summary, actor=actor)

    def request_retry(self, task_id: int, retry_at: int, summary: str, *, actor: str) -> Task:
        params = {"id": task_id, "retry_at": retry_at, "summary": summary, "now": self._clock.now_ms(), "actor": actor}

        def body(tx: Tx) -> Task:
            row = tx.one(tx.q.SQL_REQUEST_RETRY, params)
            if row is None:
                current = require_task(tx, task_id)
                status = "active with a cancel requested" if current["cancel_requested"] else current["status"]
                raise InvalidTransition(task_id, status, "ask for a retry (only a running task can)")
            return task_of(tx, row)

        return self._engine.write(body)

    def add_note(self, task_id: int, text: str, *, author: str) -> Note:
        if not text.strip():
            raise InputError("note text must not be empty")
        params = {"id": task_id, "now": self._clock.now_ms(), "author": author, "text": text}

        def body(tx: Tx) -> Note:
            require_task(tx, task_id)
            row = tx.one(tx.q.SQL_ADD_NOTE, params)
            assert row is not None
            return row_to_note(row)

        return self._engine.write(body)

    def approve(self, task_id: int, *, actor: str) -> Task:
        values = {"id": task_id, "now": self._clock.now_ms(), "actor": actor}

        def body(tx: Tx) -> Task:
            # awaiting approval → pending (it runs); awaiting review → completed
            row = tx.one(tx.q.SQL_APPROVE, values) or tx.one(tx.q.SQL_APPROVE_REVIEW, values)
            if row is None:
                raise _not_awaiting_approval(tx, task_id, "approve it")
            return task_of(tx, row)

        return self._engine.write(body)

    def reject(self, task_id: int, reason: str, *, actor: str) -> Task:
        if not reason.strip():
            raise InputError("a rejection needs a reason")
        reason = reason.strip()
        values = {"id": task_id, "now": self._clock.now_ms(), "actor": actor, "summary": f"rejected: {reason}"}

        def body(tx: Tx) -> Task:
            row = tx.one(tx.q.SQL_REJECT, values)  # awaiting approval → canceled
            if row is None:
                # awaiting review → back to the queue, the reason before its agent
                row = tx.one(tx.q.SQL_REJECT_REVIEW, values)
                if row is None:
                    raise _not_awaiting_approval(tx, task_id, "reject it")
                tx.one(tx.q.SQL_ADD_NOTE, {**values, "author": actor, "text": f"review: {reason}"})
            return task_of(tx, row)

        return self._engine.write(body)
