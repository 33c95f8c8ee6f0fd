"""The SQL of what the dashboard reads: the queue, and a task window
(``Store.task_window``) built for both backends from a ``TaskQuery`` (the condition,
the order, the page and the count), the history and what finished recently.

Everything a person types reaches the database as a parameter; literals come only
from the state table and from ints. The few pieces that differ between SQLite and
PostgreSQL (case-insensitive matching, a skill in the JSON array, text order) are
each backend's ``WindowDialect``; a built statement has both texts (``Sql``).

Costs: the open tasks are found through ``ix_tasks_status_id`` (a flood of them is
still bounded by the flood limits), so any filter and sort over them reads only
open rows. A list of finished tasks in the order they finished walks
``ix_tasks_finished`` and stops at the page; another sort of finished tasks, or
words over them, reads the rows of the statuses asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vigil.models import FINISHED_STATUSES, TaskStatus
from vigil.states import TaskState
from vigil.store.transaction import Sql
from vigil.task_query import Sort, TaskQuery

# The queue as the TUI shows it: every active task (by id), then the waiting ones,
# due first in claim order, then not-yet-due, then those waiting for a person
# (blocked, or waiting for an answer), at most :limit of them.
QUEUE = Sql("""
SELECT * FROM (SELECT * FROM tasks WHERE status = 'active' ORDER BY id) AS running
UNION ALL
SELECT * FROM (SELECT * FROM tasks WHERE status IN ('pending', 'blocked', 'waiting')
               ORDER BY status IN ('blocked', 'waiting'), (waiting_on > 0 OR scheduled_for > :now),
                        CASE WHEN waiting_on = 0 AND scheduled_for <= :now THEN priority END,
                        scheduled_for, priority, id
               LIMIT :limit) AS waiting
""")


@dataclass(frozen=True)
class WindowDialect:
    """A backend's pieces. ``contains`` and ``has_skill`` are templates over
    ``{column}`` / ``{param}`` (a ``:name`` parameter); ``folded`` orders text
    without regard to ASCII case; ``unindexed`` writes a column so that the planner
    does not choose an index for a condition on it (SQLite, which keeps no
    statistics, would otherwise sort every finished task rather than walk them in
    the order they finished)."""

    contains: str
    has_skill: str
    folded: str
    skills_text: str
    unindexed: str


# LIKE ignores ASCII case; a skill is a value of the JSON array; ``+`` keeps the
# planner off ix_tasks_status_id (walk the finish order instead).
SQLITE = WindowDialect(
    contains="{column} LIKE {param} ESCAPE '\\'",
    has_skill="EXISTS (SELECT 1 FROM json_each(skills) WHERE value = {param})",
    folded="{column} COLLATE NOCASE",
    skills_text="skills",
    unindexed="+{column}",
)
# ILIKE ignores case; ``?`` finds a string in the JSON array.
POSTGRES = WindowDialect(
    contains="{column} ILIKE {param} ESCAPE '\\'",
    has_skill="skills ? CAST({param} AS text)",
    folded="lower({column})",
    skills_text="CAST(skills AS text)",
    unindexed="{column}",
)


def _both(build: Callable[[WindowDialect], str]) -> Sql:
    """The statement ``build`` writes from each backend's pieces."""
    return Sql(sqlite=build(SQLITE), postgres=build(POSTGRES))


def like_pattern(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere (``\\`` escapes ``%`` and ``_``)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _literal(status: TaskStatus) -> str:
    return f"'{TaskStatus(status).value}'"


def distinct_states(states: tuple[TaskState, ...]) -> tuple[TaskState, ...]:
    """``states`` without a narrowing state whose whole status is there too
    (``blocked`` already lists the tasks awaiting approval)."""
    whole = {s.status for s in states if not s.narrows}
    return tuple(s for s in states if not s.narrows or s.status not in whole)


def in_finish_order(query: TaskQuery) -> bool:
    """Whether the query lists finished tasks only, the latest finish first (or last):
    then it walks ``ix_tasks_finished``."""
    return query.sort is Sort.QUEUE and {s.status for s in query.shown_states} <= FINISHED_STATUSES


def _finished(statuses: str, dialect: WindowDialect) -> str:
    """Finished tasks of ``statuses`` (SQL literals), found by walking their finish times."""
    return f"completed_at IS NOT NULL AND {dialect.unindexed.format(column='status')} IN ({statuses})"


def where(query: TaskQuery, dialect: WindowDialect) -> tuple[str, dict[str, Any]]:
    """The condition on ``tasks`` and its parameters."""
    states = distinct_states(query.shown_states)
    if in_finish_order(query) and not any(s.narrows for s in states):
        terms = [_finished(", ".join(_literal(s.status) for s in states), dialect)]
    elif {s.status for s in states if not s.narrows} == set(TaskStatus):
        terms = ["1 = 1"]  # every task: no condition to test on each row
    else:
        # Over finished tasks (most of a long history) a scan reads fewer pages than
        # the status index and a lookup of each row; the open ones are few.
        column = "status" if all(s.status.is_open for s in states) else dialect.unindexed.format(column="status")
        terms = ["(" + " OR ".join(s.sql(column) for s in states) + ")"]
    params: dict[str, Any] = {}
    for n, word in enumerate(query.words):
        params[f"w{n}"] = like_pattern(word)
        terms.append(dialect.contains.format(column="subject", param=f":w{n}"))
    if query.ids:
        terms.append(f"id IN ({', '.join(str(int(i)) for i in query.ids)})")
    if query.sources:
        starts = []
        for n, source in enumerate(query.sources):
            params[f"s{n}"] = source
            starts.append(f"substr(source, 1, length(CAST(:s{n} AS text))) = :s{n}")
        terms.append("(" + " OR ".join(starts) + ")")
    for n, skill in enumerate(query.skills):
        params[f"k{n}"] = skill
        terms.append(dialect.has_skill.format(param=f":k{n}"))
    if query.priority is not None:
        op, value = query.priority
        params["pri"] = int(value)
        terms.append(f"priority {op} :pri")
    return " AND ".join(terms), params


def queue_rank() -> str:
    """Where a task stands in the dispatcher's order: 0 running, 1 due (claimed next
    by priority, then due time), 2 pending but not due or waiting on a dependency,
    3 any other open status (blocked), 4 finished."""
    finished = ", ".join(_literal(s) for s in sorted(FINISHED_STATUSES))
    return (
        "CASE WHEN status = 'active' THEN 0"
        " WHEN status = 'pending' AND waiting_on = 0 AND scheduled_for <= :now THEN 1"
        " WHEN status = 'pending' THEN 2"
        f" WHEN status IN ({finished}) THEN 4 ELSE 3 END"
    )


def order(query: TaskQuery, dialect: WindowDialect) -> str:
    """The ORDER BY list (every key reversed when ``descending``)."""
    if in_finish_order(query):
        keys = ["-completed_at", "-id"]  # finished: the latest finish first (ix_tasks_finished)
    elif query.sort is Sort.QUEUE:
        rank = queue_rank()
        keys = [
            rank,
            f"CASE WHEN {rank} = 1 THEN priority ELSE 0 END",
            f"CASE WHEN {rank} = 4 THEN -completed_at WHEN {rank} = 0 THEN 0 ELSE scheduled_for END",
            f"CASE WHEN {rank} IN (2, 3) THEN priority ELSE 0 END",
            f"CASE WHEN {rank} = 4 THEN -id ELSE id END",
        ]
    else:
        column = {
            Sort.PRIORITY: "priority",
            Sort.AGE: "id",  # ids are given in the order tasks are added: an index walk, no sort
            Sort.SUBJECT: dialect.folded.format(column="subject"),
            Sort.SOURCE: "source",
            Sort.COST: "cost_usd",
            Sort.TRIES: "attempt_count",
            Sort.STATUS: "status",
            Sort.SKILLS: dialect.skills_text,
            Sort.ID: "id",
        }[query.sort]
        keys = [column] if column == "id" else [column, "id"]
    if not query.descending:
        return ", ".join(_plain(key) for key in keys)
    return ", ".join(f"{_plain(key)} DESC" if not key.startswith("-") else key[1:] for key in keys)


def _plain(key: str) -> str:
    """``-column`` is that column descending (an index can be walked backwards)."""
    return f"{key[1:]} DESC" if key.startswith("-") and key[1:].isidentifier() else key


def page_sql(query: TaskQuery) -> tuple[Sql, Sql, dict[str, Any]]:
    """The page (``:now``, ``:limit``, ``:offset``) and the count, with the filter's
    parameters (the same on both backends)."""
    pages, counts = [], []
    for dialect in (SQLITE, POSTGRES):
        condition, params = where(query, dialect)
        pages.append(
            f"SELECT * FROM tasks WHERE {condition} ORDER BY {order(query, dialect)} LIMIT :limit OFFSET :offset"
        )
        counts.append(f"SELECT count(*) AS n FROM tasks WHERE {condition}")
    return Sql(sqlite=pages[0], postgres=pages[1]), Sql(sqlite=counts[0], postgres=counts[1]), params


def narrowed_count_sql(state: TaskState) -> Sql:
    """How many tasks are in a state that narrows a status (one range of the status index)."""
    return Sql(f"SELECT count(*) AS n FROM tasks WHERE {state.sql()}")


def history_sql(*, searching: bool) -> Sql:
    """Finished tasks, the latest finish first, keyset-paged on (``completed_at``,
    ``id``) below ``:before_at``/``:before_id``, at most ``:limit``; ``searching``
    keeps those whose subject, description, source or result contains ``:pattern``.
    Walks ``ix_tasks_finished`` downwards and stops at the page (a rare match over a
    long history reads until it has found a page, or reached the end)."""
    return _HISTORY[searching]


def _history(dialect: WindowDialect, *, searching: bool) -> str:
    finished = _finished(", ".join(_literal(s) for s in sorted(FINISHED_STATUSES)), dialect)
    search = ""
    if searching:
        columns = ("subject", "description", "source", "coalesce(result_summary, '')")
        search = " AND (" + " OR ".join(dialect.contains.format(column=c, param=":pattern") for c in columns) + ")"
    return (
        f"SELECT * FROM tasks WHERE {finished} AND (completed_at, id) < (:before_at, :before_id)"
        f"{search} ORDER BY completed_at DESC, id DESC LIMIT :limit"
    )


_HISTORY = {
    searching: Sql(sqlite=_history(SQLITE, searching=searching), postgres=_history(POSTGRES, searching=searching))
    for searching in (False, True)
}


def _recent(dialect: WindowDialect) -> str:
    ran = _finished("'completed', 'failed'", dialect)
    return (
        f"SELECT * FROM tasks WHERE {ran} AND completed_at >= :since ORDER BY completed_at DESC, id DESC LIMIT :limit"
    )


# What completed or failed at or after :since, the latest finish first, at most
# :limit: a walk down ix_tasks_finished that stops at the page.
RECENT = _both(_recent)
