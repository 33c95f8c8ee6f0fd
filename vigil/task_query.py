"""Which tasks a list shows and in what order: a value the store answers whole.

The TUI's queue and ``vigil task list`` describe what they want as a
``TaskQuery`` (states, words, ids, sources, skills, a priority bound, a sort);
the store filters, sorts, counts and pages it with indexed queries
(``Store.task_window``) and returns a ``TaskWindow``: one page of rows, how many
match in all, and what the queue's header needs, all read from one snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from vigil.models import Task
from vigil.states import OPEN_STATES, TaskState

PRIORITY_OPERATORS = ("<", "<=", ">", ">=", "=")


class Sort(StrEnum):
    """What a list is ordered by; every order ends with the id, so it is total."""

    QUEUE = "queue"  # the dispatcher's order: running, due (priority, due time), waiting, blocked, finished
    PRIORITY = "priority"
    AGE = "age"  # the order tasks were added (ids; ascending: oldest first)
    SUBJECT = "subject"
    SOURCE = "source"
    COST = "cost"
    TRIES = "tries"
    STATUS = "status"
    SKILLS = "skills"
    ID = "id"


@dataclass(frozen=True)
class TaskQuery:
    """``states`` empty means the open ones (pending, active, blocked). Every other
    field narrows: a task must match all of them. ``words``: each is in the subject
    (case-insensitive for ASCII); ``sources``: the source starts with one of them;
    ``skills``: the task lists every one; ``priority``: (operator, value), the
    operator one of ``PRIORITY_OPERATORS``."""

    states: tuple[TaskState, ...] = ()
    words: tuple[str, ...] = ()
    ids: tuple[int, ...] = ()
    sources: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    priority: tuple[str, int] | None = None
    sort: Sort = Sort.QUEUE
    descending: bool = False

    def __post_init__(self) -> None:
        if self.priority is not None and self.priority[0] not in PRIORITY_OPERATORS:
            raise ValueError(f"unknown priority operator {self.priority[0]!r}")

    @property
    def shown_states(self) -> tuple[TaskState, ...]:
        """The states the query lists (the open ones when it names none)."""
        return self.states or OPEN_STATES

    @property
    def is_plain(self) -> bool:
        """Only states (or nothing) are asked for: no words, ids, sources, skills or
        priority."""
        return not (self.words or self.ids or self.sources or self.skills or self.priority)


@dataclass(frozen=True)
class TaskWindow:
    """One page of a ``TaskQuery`` and what surrounds it, from one snapshot.

    ``tasks``: the rows ``offset`` … ``offset + len(tasks) - 1`` (0-based) of the
    ``total`` that match, in the query's order. ``counts``: tasks per state name
    (every state of ``TASK_STATES``; a narrowing state's tasks are counted in
    their status too). ``recent``: completed or failed tasks that finished at or
    after the time asked for, the latest finish first (empty when not asked).
    ``active``: the running tasks, by id. ``next_id``: the task the dispatcher
    takes next (None: nothing due); ``next_due_at``: the earliest due time of a
    pending task without unfinished dependencies (epoch ms; None: none)."""

    tasks: tuple[Task, ...]
    total: int
    offset: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)
    recent: tuple[Task, ...] = ()
    active: tuple[Task, ...] = ()
    next_id: int | None = None
    next_due_at: int | None = None

    @property
    def after(self) -> int:
        """How many matching rows come after this page."""
        return max(0, self.total - self.offset - len(self.tasks))
