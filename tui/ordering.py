"""Sorting the queue: ``s`` cycles through ``SORT_CYCLE``, a click on a column's
header sorts by it and a second click reverses. None is the dispatcher's order,
the default. The store sorts (``TaskQuery.sort``): the order covers every task
that matches, not only the rows on screen.
"""

from __future__ import annotations

from vigil.task_query import Sort

SortBy = tuple[Sort, bool]  # (what, descending)

# A column's key → what a click on its header sorts by ("when" shows due time or age).
COLUMN_SORTS: dict[str, Sort] = {
    "id": Sort.ID,
    "pri": Sort.PRIORITY,
    "status": Sort.STATUS,
    "when": Sort.AGE,
    "subject": Sort.SUBJECT,
    "source": Sort.SOURCE,
    "tries": Sort.TRIES,
    "cost": Sort.COST,
    "skills": Sort.SKILLS,
}
SORT_CYCLE: tuple[Sort | None, ...] = (Sort.PRIORITY, Sort.AGE, Sort.SUBJECT, Sort.SOURCE, Sort.COST, None)
# How the note under the filter says each direction.
DIRECTIONS: dict[Sort, tuple[str, str]] = {
    Sort.PRIORITY: ("most urgent first", "least urgent first"),
    Sort.AGE: ("oldest first", "newest first"),
    Sort.COST: ("cheapest first", "costliest first"),
    Sort.TRIES: ("fewest tries first", "most tries first"),
    Sort.ID: ("lowest id first", "highest id first"),
}


def next_sort(current: SortBy | None) -> SortBy | None:
    """What ``s`` sorts by after ``current``."""
    what = None if current is None else current[0]
    if what not in SORT_CYCLE:
        return None
    following = SORT_CYCLE[(SORT_CYCLE.index(what) + 1) % len(SORT_CYCLE)]
    return None if following is None else (following, False)


def clicked_sort(current: SortBy | None, column: str) -> SortBy | None:
    """What a click on ``column``'s header sorts by (a column that does not sort
    leaves the order as it is)."""
    if column not in COLUMN_SORTS:
        return current
    what = COLUMN_SORTS[column]
    return (what, current == (what, False))


def sort_words(sort_by: SortBy) -> str:
    """``sorted by age, oldest first``."""
    what, descending = sort_by
    ascending_words, descending_words = DIRECTIONS.get(what, ("A to Z", "Z to A"))
    return f"sorted by {what}, {descending_words if descending else ascending_words}"
