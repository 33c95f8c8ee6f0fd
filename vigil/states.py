"""The states a task is shown and filtered in: one table for the whole program.

A state is a status, or a status narrowed by one of the task's columns: a task
*awaiting approval* is ``blocked`` with its ``approval`` ``pending``, one
*awaiting review* (of its result, after a run) is ``blocked`` with its ``review``
``pending``. Each row
of ``TASK_STATES`` says how the state is named in a filter (``status:approval``
in the TUI, ``vigil task list --status approval``), its label (the header's
count), what it means in words (the detail pane, the help), the word the queue's
status column shows, the marker the queue draws beside the id, its style and the
header key that filters by it.
A new state (a task awaiting review, a task waiting for a person's answer) is
one more row.

A state that narrows nothing (``narrow`` None) is the whole status: ``blocked``
counts and lists the blocked tasks awaiting approval or review too. A task is *drawn* in
the narrowest state that matches it (``state_of``). Styles are Rich style
strings; the core only passes them on.
"""

from __future__ import annotations

from dataclasses import dataclass

from vigil.models import ApprovalState, Task, TaskStatus


@dataclass(frozen=True)
class TaskState:
    name: str  # the filter word: status:<name>, --status <name>
    status: TaskStatus
    narrow: tuple[str, str] | None  # (column, value) that narrows the status; None: the whole status
    label: str  # the header's count ("Approval")
    words: str  # what tasks in it are, in the detail pane and the help ("awaiting approval")
    cell: str  # the queue's status column (at most 9 cells)
    marker: str  # drawn beside the id (" ": none)
    style: str  # of the status cell and the marker
    key: str  # the header key that shows only this state

    @property
    def narrows(self) -> bool:
        """Whether it is a part of its status rather than all of it."""
        return self.narrow is not None

    def matches(self, task: Task) -> bool:
        if task.status is not self.status:
            return False
        return self.narrow is None or getattr(task, self.narrow[0]) == self.narrow[1]

    def sql(self, status_column: str = "status") -> str:
        """The state as an SQL condition on ``tasks`` (literals from this table only);
        ``status_column`` is how the status column is written (``+status``: not
        through its index)."""
        condition = f"{status_column} = '{self.status.value}'"
        if self.narrow is None:
            return condition
        column, value = self.narrow
        return f"({condition} AND {column} = '{value}')"


_PENDING = ApprovalState.PENDING.value
TASK_STATES: tuple[TaskState, ...] = (
    # name, status, narrow, label, words, cell, marker, style, key
    TaskState("active", TaskStatus.ACTIVE, None, "Active", "running", "active", " ", "bold green", "A"),
    TaskState("pending", TaskStatus.PENDING, None, "Pending", "waiting their turn", "pending", " ", "", "P"),
    TaskState("blocked", TaskStatus.BLOCKED, None, "Blocked", "blocked", "blocked", " ", "yellow", "B"),
    TaskState("approval", TaskStatus.BLOCKED, ("approval", _PENDING), "Approval", "awaiting approval", "approval",
              "?", "bold magenta", "V"),
    TaskState("review", TaskStatus.BLOCKED, ("review", _PENDING), "Review", "awaiting review", "review", "!",
              "bold cyan", "E"),
    TaskState("waiting", TaskStatus.WAITING, None, "Waiting", "waiting for a person's answer", "waiting", "…",
              "bold magenta", "W"),
    TaskState("completed", TaskStatus.COMPLETED, None, "Completed", "completed", "completed", " ", "dim green", "C"),
    TaskState("failed", TaskStatus.FAILED, None, "Failed", "failed", "failed", " ", "bold red", "F"),
    TaskState("canceled", TaskStatus.CANCELED, None, "Canceled", "canceled", "canceled", " ", "dim", "X"),
)  # fmt: skip
STATES_BY_NAME = {state.name: state for state in TASK_STATES}
OPEN_STATES = tuple(s for s in TASK_STATES if s.status.is_open and not s.narrows)


def state_of(task: Task) -> TaskState:
    """The narrowest state that matches ``task`` (awaiting approval before blocked)."""
    whole = None
    for state in TASK_STATES:
        if state.status is task.status:
            if state.narrows and state.matches(task):
                return state
            if not state.narrows:
                whole = state
    assert whole is not None, f"no state for status {task.status}"
    return whole


def parse_states(names: str) -> tuple[TaskState, ...]:
    """``"failed,approval"`` → those states, in table order. Raises ``ValueError``
    naming the states there are."""
    wanted = {name.strip().lower() for name in names.split(",") if name.strip()}
    unknown = sorted(wanted - STATES_BY_NAME.keys())
    if unknown:
        known = ", ".join(STATES_BY_NAME)
        raise ValueError(f"unknown status {unknown[0]!r} (expected {known})")
    return tuple(state for state in TASK_STATES if state.name in wanted)
