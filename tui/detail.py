"""The detail pane beside the queue: every field of the highlighted task.

It shows the ``Task`` the table already holds (no query); the task screen (enter)
adds runs, notes, events and the transcript.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tui.cells import money
from tui.times import Times, relative
from vigil.models import Task
from vigil.printable import SUBJECT_SHOWN_CHARS, TEXT_SHOWN_CHARS, capped
from vigil.states import state_of


def depends_text(task: Task, depends_on: Sequence[int] | None) -> Text:
    """``#3, #4 (1 unfinished)``; without the ids (not read yet) the count alone."""
    unfinished = f"{task.waiting_on} unfinished" if task.waiting_on else "all finished"
    if depends_on:
        return Text(", ".join(f"#{d}" for d in depends_on) + f" ({unfinished})")
    if task.waiting_on:
        return Text(f"{task.waiting_on} unfinished {'dependency' if task.waiting_on == 1 else 'dependencies'}")
    return Text("—")


def status_text(task: Task) -> Text:
    """``blocked, awaiting approval``; ``active (cancel requested)``."""
    state = state_of(task)
    words = str(task.status) if not state.narrows else f"{task.status}, {state.words}"
    return Text(words + (" (cancel requested)" if task.cancel_requested else ""), style=state.style)


def field_table(task: Task, now_ms: int, times: Times, depends_on: Sequence[int] | None = None) -> Table:
    """Label/value rows for a task; values are plain ``Text``; times as ``times`` shows
    them. ``depends_on``: the ids of its dependencies (None: not read)."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")

    def when(ms: int | None) -> Text:
        return Text("—" if ms is None else f"{times.at(ms)} ({relative(ms, now_ms)})")

    rows: list[tuple[str, Text]] = [
        ("status", status_text(task)),
        ("priority", Text(str(task.priority))),
        ("source", Text(task.source)),
        ("source key", Text(task.source_key or "—")),
        ("skills", Text(", ".join(task.skills) or "—")),
        ("parent", Text(f"#{task.parent_id}" if task.parent_id else "—")),
        ("depends on", depends_text(task, depends_on)),
        ("due", when(task.scheduled_for)),
        ("created", when(task.created_at)),
        ("started", when(task.started_at)),
        ("finished", when(task.completed_at)),
        ("attempts", Text(f"{task.attempt_count} of {task.max_retries + 1}")),
        ("cost", Text(f"{money(task.cost_usd)} (API {money(task.api_cost_usd)})")),
        ("tokens", Text(f"{task.tokens_in} in / {task.tokens_out} out")),
        ("model", Text(task.model or "—")),
        ("executor", Text(task.executor or "—")),
        ("claimed by", Text(task.claimed_by or "—")),
    ]
    if task.github is not None and task.github.issue_text is not None:
        rows.append(("issue", Text(task.github.issue_text)))
    if task.github is not None and task.github.pull_text is not None:
        rows.append(("pull request", Text(task.github.pull_text)))
    if task.question is not None:  # the agent's latest question to a person, and the answer
        choices = f"  [{' | '.join(task.choices)}]" if task.choices else ""
        rows.append(("question", Text(capped(task.question + choices, TEXT_SHOWN_CHARS), style="bold magenta")))
        rows.append(("answer", Text(task.answer if task.answer is not None else "— (waiting: w answers)")))
    for label, value in rows:
        table.add_row(label, value)
    return table


def task_summary(task: Task, now_ms: int, times: Times, depends_on: Sequence[int] | None = None) -> RenderableType:
    title = Text(f"#{task.id} ", style="bold")
    title.append(capped(task.subject, SUBJECT_SHOWN_CHARS), style=f"bold {state_of(task).style}".strip())
    parts: list[RenderableType] = [title, field_table(task, now_ms, times, depends_on)]
    if task.description:
        parts += [Text("description", style="dim underline"), Text(capped(task.description, TEXT_SHOWN_CHARS))]
    if task.result_summary:
        parts += [Text("result", style="dim underline"), Text(task.result_summary)]
    return Group(*parts)


class DetailPane(VerticalScroll):
    """Shows one task; ``show(None, …)`` says nothing is highlighted."""

    DEFAULT_CSS = """
    DetailPane { width: 40%; min-width: 30; border-left: solid $primary; padding: 0 1; }
    """

    def __init__(self, times: Times, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.times = times
        self.shown: Task | None = None
        self._body = Static()

    def compose(self) -> ComposeResult:
        yield self._body

    def show(self, task: Task | None, now_ms: int, depends_on: Sequence[int] | None = None) -> None:
        """``depends_on``: the task's dependency ids, once read (None: the count only)."""
        self.shown = task
        if task is None:
            self._body.update(Text("no task highlighted", style="dim"))
        else:
            self._body.update(task_summary(task, now_ms, self.times, depends_on))
