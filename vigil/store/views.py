"""The reads behind the lists people look at: a page of any ``TaskQuery`` with
what surrounds it (``read_window``), and the history in the order tasks finished
(``read_history``). Written once for both backends, each a body run in one
``Engine.snapshot``, so a page, its total and its counts agree with each other.
"""

from __future__ import annotations

from typing import Any

from vigil.models import Task, TaskStatus
from vigil.states import TASK_STATES
from vigil.store.rows import Row, task_from_row
from vigil.store.sql.runs import ACTIVE_TASKS, NEXT_DUE_AT, NEXT_DUE_ID
from vigil.store.sql.tasks import COUNT_BY_STATUS
from vigil.store.sql.window import RECENT, distinct_states, history_sql, like_pattern, narrowed_count_sql, page_sql
from vigil.store.transaction import Sql, Tx
from vigil.task_query import TaskQuery, TaskWindow

ACTIVE_LIMIT = 20  # running tasks read with a window (one per lane)
RECENT_LIMIT = 5
NO_UPPER = 2**62  # "no upper bound" for keyset paging


def task_of(tx: Tx, row: Row) -> Task:
    return task_from_row(row, tx.loads(row["skills"]))


def state_counts(tx: Tx) -> dict[str, int]:
    """Tasks per state name: the statuses from the trigger-kept counts, a narrowing
    state counted over its status's rows (open, so few)."""
    by_status = dict.fromkeys(TaskStatus, 0)
    by_status.update({TaskStatus(r["status"]): int(r["n"]) for r in tx.all(COUNT_BY_STATUS)})
    counts = {}
    for state in TASK_STATES:
        if state.narrows:
            row = tx.one(narrowed_count_sql(state))
            counts[state.name] = 0 if row is None else int(row["n"])
        else:
            counts[state.name] = by_status[state.status]
    return counts


def _total(tx: Tx, query: TaskQuery, count_sql: Sql, params: dict[str, Any], counts: dict[str, int]) -> int:
    """How many tasks match: from the counts when only states are asked for."""
    if query.is_plain:
        return sum(counts[s.name] for s in distinct_states(query.shown_states))
    row = tx.one(count_sql, params)
    return 0 if row is None else int(row["n"])


def read_window(
    tx: Tx, query: TaskQuery, *, now_ms: int, offset: int, limit: int, recent_since_ms: int | None
) -> TaskWindow:
    """``Store.task_window``'s body (see there). An ``offset`` at or past the end
    shows the last page instead."""
    rows_sql, count_sql, params = page_sql(query)
    counts = state_counts(tx)
    page_params = {**params, "now": now_ms, "limit": limit}
    if offset == 0 and not query.is_plain:
        # A first page that is not full is every match: no second pass to count them.
        page = tx.all(rows_sql, {**page_params, "offset": 0})
        total = len(page) if len(page) < limit else _total(tx, query, count_sql, params, counts)
    else:
        total = _total(tx, query, count_sql, params, counts)
        if offset >= total:
            offset = max(0, total - limit)
        page = tx.all(rows_sql, {**page_params, "offset": offset})
    recent: tuple[Task, ...] = ()
    if recent_since_ms is not None:
        found = tx.all(RECENT, {"since": recent_since_ms, "limit": RECENT_LIMIT})
        recent = tuple(task_of(tx, r) for r in found)
    active = tx.all(ACTIVE_TASKS)[:ACTIVE_LIMIT]
    next_row = tx.one(NEXT_DUE_ID, {"now": now_ms})
    due_row = tx.one(NEXT_DUE_AT)
    return TaskWindow(
        tasks=tuple(task_of(tx, r) for r in page),
        total=total,
        offset=offset,
        counts=counts,
        recent=recent,
        active=tuple(task_of(tx, r) for r in active),
        next_id=None if next_row is None else int(next_row["id"]),
        next_due_at=None if due_row is None or due_row["m"] is None else int(due_row["m"]),
    )


def read_history(tx: Tx, text: str, *, before: tuple[int, int] | None, limit: int) -> list[Task]:
    """``Store.finished_tasks``' body (see there)."""
    searching = bool(text)
    at, task_id = before if before is not None else (NO_UPPER, NO_UPPER)
    params: dict[str, Any] = {"before_at": at, "before_id": task_id, "limit": limit}
    if searching:
        params["pattern"] = like_pattern(text)
    return [task_of(tx, r) for r in tx.all(history_sql(searching=searching), params)]
