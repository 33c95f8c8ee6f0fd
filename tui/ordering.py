"""Sorting the queue table by a column: ``s`` cycles through ``SORT_CYCLE``, a click
on a column's header sorts by it and a second click reverses. None is the
dispatcher's order, the default. Sorting only re-orders what was loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from vigil.models import Task

SortBy = tuple[str, bool]  # (column key, descending)

SORT_KEYS: dict[str, Callable[[Task], Any]] = {
    "id": lambda t: t.id,
    "pri": lambda t: t.priority,
    "status": lambda t: str(t.status),
    "when": lambda t: t.created_at,
    "subject": lambda t: t.subject.casefold(),
    "source": lambda t: t.source,
    "tries": lambda t: t.attempt_count,
    "cost": lambda t: t.cost_usd,
    "skills": lambda t: ",".join(t.skills),
}
SORT_CYCLE: tuple[str | None, ...] = ("pri", "when", "subject", "source", "cost", None)


def next_sort(current: SortBy | None) -> SortBy | None:
    """What ``s`` sorts by after ``current``."""
    column = None if current is None else current[0]
    if column not in SORT_CYCLE:
        return None
    following = SORT_CYCLE[(SORT_CYCLE.index(column) + 1) % len(SORT_CYCLE)]
    return None if following is None else (following, False)


def clicked_sort(current: SortBy | None, column: str) -> SortBy | None:
    """What a click on ``column``'s header sorts by (None: not a sortable column)."""
    if column not in SORT_KEYS:
        return current
    return (column, current == (column, False))


def sort_rows(rows: Sequence[Task], sort_by: SortBy | None) -> tuple[Task, ...]:
    if sort_by is None:
        return tuple(rows)
    column, descending = sort_by
    return tuple(sorted(rows, key=SORT_KEYS[column], reverse=descending))
