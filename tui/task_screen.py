"""The task screen (enter on a row): every field, description and result as
Markdown, the attempts, notes and audit events, and for a running task a live
tail of its transcript (re-read when the file grows, no query). The open task can
be steered with the queue's keys (``+ - d x r``, and ``a``/``R`` to approve or
reject a task that waits for approval, or for the review of its result), through
the same conditional writes; a task waiting for an answer is answered with ``w``
(``tui.answer_dialog``), a blocked one put back in the queue with ``u``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from dispatch.attempt import transcript_path
from tui.answer_dialog import ask_and_answer
from tui.cells import money, one_line
from tui.context import Context
from tui.detail import field_table
from tui.dialogs import preview
from tui.diff_screen import DiffScreen
from tui.forms import ReasonForm
from tui.keybar import KeyBar
from tui.keys import ANSWER, APPROVE, CANCEL, DEFER, DIFF, LOWER, RAISE, REJECT, RETRY, UNBLOCK
from tui.live import Banner, LiveScreen
from tui.loaders import TaskDetail, load_task
from tui.safety import guarded
from tui.steering import KEY_ACTIONS, Action, applies
from tui.tabs import LoopLine, TabBar
from tui.task_actions import TaskActions
from tui.times import Times, span
from vigil.errors import InputError, TaskNotFound
from vigil.models import Run, Task, TaskEvent, TaskStatus
from vigil.printable import SUBJECT_SHOWN_CHARS, TEXT_SHOWN_CHARS, capped
from vigil.render import TIME_KINDS


def can_unblock(task: Task) -> bool:
    """Blocked, and not waiting for a person's approval or review (approve/reject decide those)."""
    return task.status is TaskStatus.BLOCKED and not (task.awaiting_approval or task.awaiting_review)


# Keys that apply to one state only, outside the queue's steering actions
PERSON_ONLY = {
    "answer": lambda task: task.status is TaskStatus.WAITING,
    "unblock": can_unblock,
}
TAIL_LINES = 40
TAIL_BYTES = 64_000


def event_value(event: TaskEvent, value: str | None, times: Times) -> str:
    """An audit value as the screen shows it: a time (a deferral's due times are
    stored as epoch ms) as every time is written, anything else as stored."""
    if value is not None and event.kind in TIME_KINDS and value.lstrip("-").isdigit():
        return times.at(int(value))
    return value or ""


def runs_table(runs: tuple[Run, ...], times: Times) -> Table:
    table = Table("#", "outcome", "started", "duration", "cost", "tokens in/out", "model", "error", box=None)
    for run in runs:
        duration = "running" if run.finished_at is None else span(run.finished_at - run.started_at)
        table.add_row(
            str(run.attempt),
            Text(run.outcome or "—"),
            times.at(run.started_at),
            duration,
            money(run.cost_usd),
            f"{run.tokens_in}/{run.tokens_out}",
            Text(run.model or "—"),
            Text(one_line(run.error or "", 60), style="red"),
        )
        for denial in run.permission_denials:  # tool calls the agent CLI refused
            table.add_row("", "", "", "", "", "", "", Text(f"denied: {one_line(denial, 60)}", style="yellow"))
    return table


def read_tail(path: Path) -> str:
    """The last ``TAIL_LINES`` lines of a file (at most ``TAIL_BYTES`` read)."""
    with path.open("rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - TAIL_BYTES))
        data = handle.read().decode("utf-8", errors="replace")
    return "\n".join(data.splitlines()[-TAIL_LINES:])


def open_task(app: App[Any], ctx: Context, task_id: int) -> None:
    """Push the task screen for ``task_id``: one screen, installed once and reused."""
    if not app.is_screen_installed("task"):
        app.install_screen(TaskScreen(ctx, task_id), "task")
    screen = app.get_screen("task")
    assert isinstance(screen, TaskScreen)
    screen.show_task(task_id)
    if screen not in app.screen_stack:
        app.push_screen(screen)


class TaskScreen(LiveScreen[TaskDetail | None]):
    TITLE = "Task"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace,q", "back", "Back", tooltip="back to the screen below"),
        RAISE,
        LOWER,
        DEFER,
        CANCEL,
        RETRY,
        APPROVE,
        REJECT,
        DIFF,
        ANSWER,
        UNBLOCK,
    ]

    def __init__(self, ctx: Context, task_id: int) -> None:
        super().__init__(ctx, name="task")
        self.task_id = task_id
        self.detail: TaskDetail | None = None
        self.steering = TaskActions(self, self._open_task, lambda: False, self.reload)
        self._tail_key: tuple[str, int] | None = None
        self._shown: dict[str, str] = {}  # Markdown text shown, by selector

    def show_task(self, task_id: int) -> None:
        """Show another task: the screen is made once and kept (composing it costs
        more than a keypress may), so what it showed goes first."""
        if task_id == self.task_id and self.detail is not None:
            return
        self.task_id = task_id
        self.detail = None
        self.loads = 0
        self._tail_key = None
        if self.is_mounted:
            self.query_one("#title", Static).update(Text(f"#{task_id} …", style="bold"))
            self.query_one(VerticalScroll).scroll_home(animate=False)

    def compose(self) -> ComposeResult:
        yield Banner()
        yield TabBar("task", self.ctx.home_label)
        yield LoopLine(self.ctx)
        with VerticalScroll():
            yield Static(id="title")
            yield Static(id="fields")
            yield Static(Text("description", style="bold underline"))
            yield Static(id="description", classes="markdown")
            yield Static(Text("result", style="bold underline"))
            yield Static(id="result", classes="markdown")
            yield Static(Text("attempts", style="bold underline"))
            yield Static(id="runs")
            yield Static(Text("notes", style="bold underline"))
            yield Static(id="notes")
            yield Static(Text("events", style="bold underline"))
            yield Static(id="events")
            yield Static(id="transcript")
        yield KeyBar(self.ctx)

    def on_mount(self) -> None:
        # Anchored but released: the page opens at the top; once the reader goes to
        # the bottom (End), it stays there as the transcript grows, until they
        # scroll up again.
        scroll = self.query_one(VerticalScroll)
        scroll.anchor()
        scroll.release_anchor()
        self.set_interval(1.0, self._tail)

    def _markdown(self, selector: str, text: str) -> None:
        """Show ``text`` as Markdown (Rich's: one renderable, not a tree of widgets
        to mount, so the screen opens at once); re-rendered only on change."""
        if self._shown.get(selector) != text:
            self._shown[selector] = text
            self.query_one(selector, Static).update(Markdown(text))

    async def load(self) -> TaskDetail | None:
        try:
            return await load_task(self.ctx.store, self.task_id)
        except TaskNotFound:
            return None

    def apply(self, data: TaskDetail | None) -> None:
        detail: TaskDetail | None = data
        if detail is not None and detail.task.id != self.task_id:
            return  # read for the task shown before: another load follows
        self.detail = detail
        if detail is None:
            self.query_one("#title", Static).update(Text(f"task #{self.task_id} no longer exists", style="red"))
            return
        task = detail.task
        now = self.ctx.clock.now_ms()
        title = Text(f"#{task.id} ", style="bold")
        title.append(capped(task.subject, SUBJECT_SHOWN_CHARS), style="bold")
        self.query_one("#title", Static).update(title)
        fields = field_table(task, now, self.ctx.times, detail.depends_on)
        self.query_one("#fields", Static).update(fields)
        self._markdown("#description", capped(task.description, TEXT_SHOWN_CHARS) or "*(none)*")
        result = "\n\n".join(part for part in (task.result_summary, task.result_detail) if part)
        self._markdown("#result", result or "*(none yet)*")
        self.query_one("#runs", Static).update(
            runs_table(detail.runs, self.ctx.times) if detail.runs else Text("none", style="dim")
        )
        notes = Text()
        for note in detail.notes:
            notes.append(f"{self.ctx.times.at(note.at)} {note.author}: ", style="dim")
            notes.append(capped(note.text, TEXT_SHOWN_CHARS) + "\n")
        self.query_one("#notes", Static).update(notes or Text("none", style="dim"))
        events = Text()
        for event in detail.events:
            events.append(f"{self.ctx.times.at(event.at)} {event.actor} {event.kind} ", style="dim")
            before, after = (
                event_value(event, event.from_value, self.ctx.times),
                event_value(event, event.to_value, self.ctx.times),
            )
            events.append(f"{before} → {after}\n" if before else f"{after}\n")
        self.query_one("#events", Static).update(events)
        self._tail_key = None
        self._tail()
        self.refresh_bindings()

    @guarded("reading the transcript")
    def _tail(self) -> None:
        """Re-read the running attempt's transcript when it grew (a file, no query)."""
        if self.app.screen is not self:
            return  # kept for the next task, but not in front: nothing to follow
        widget = self.query_one("#transcript", Static)
        detail = self.detail
        if detail is None or detail.task.status is not TaskStatus.ACTIVE or not detail.runs:
            widget.display = False
            return
        run = detail.runs[-1]
        # The dispatcher stores the path when the run ends; while it runs, the file
        # is at the dispatcher's conventional place.
        path = Path(run.transcript_path or transcript_path(self.ctx.settings, run.task_id, run.attempt))
        path_text = str(path)
        try:
            size = path.stat().st_size
        except OSError:
            widget.update(Text(f"transcript: {path} not readable yet", style="dim"))
            return
        if self._tail_key == (path_text, size):
            return
        self._tail_key = (path_text, size)
        self.run_worker(self._show_tail(path), group="tail", exclusive=True, exit_on_error=False)

    async def _show_tail(self, path: Path) -> None:
        text = await asyncio.to_thread(read_tail, path)
        if self.is_attached:
            widget = self.query_one("#transcript", Static)
            widget.display = True
            widget.update(Text("live transcript\n", style="bold underline") + Text(text))

    def times_changed(self) -> None:
        if self.detail is not None:
            self.apply(self.detail)  # the times are formatted in apply; no query

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_diff(self) -> None:
        if self.detail is not None and self.detail.task.worktree is not None:
            self.app.push_screen(DiffScreen(self.ctx, self.task_id))

    # --- steering the open task (the same conditional writes as the queue) -------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "diff":  # a task with a branch (docs/coding.md)
            return True if self.detail is not None and self.detail.task.worktree is not None else None
        if action not in KEY_ACTIONS and action not in PERSON_ONLY:
            return True
        if self.ctx.readonly:
            return False
        task = self.detail.task if self.detail is not None else None
        if task is None:
            return None
        if action in PERSON_ONLY:
            return True if PERSON_ONLY[action](task) else None
        return True if applies(KEY_ACTIONS[action], task) else None

    def action_answer(self) -> None:
        if self.detail is None or self.detail.task.status is not TaskStatus.WAITING:
            return
        ask_and_answer(self, self.detail.task)

    def action_unblock(self) -> None:
        if self.detail is None or not can_unblock(self.detail.task):
            return
        task = self.detail.task

        def answered(note: str | None) -> None:
            if note is not None:
                self.run_worker(self._unblock(task, note or None), group="write", exit_on_error=False)

        title = Text(f"Unblock #{task.id}? It goes back in the queue, due now.", style="bold")
        label = "A note for its agent (optional)"
        self.app.push_screen(ReasonForm(title, label=label, required=False, details=preview([task], [])), answered)

    @guarded("unblocking the task")
    async def _unblock(self, task: Task, note: str | None) -> None:
        try:
            await self.ctx.store.unblock(task.id, note, actor=self.ctx.actor)
        except InputError as err:
            self.notify(str(err), severity="warning", markup=False)
        else:
            self.notify(f"#{task.id} unblocked; due now", markup=False)
        self.reload()

    def _open_task(self) -> list[Task]:
        """What the task keys act on: the task, once loaded."""
        return [] if self.detail is None else [self.detail.task]

    def action_raise(self) -> None:
        self.steering.act(Action.RAISE)

    def action_lower(self) -> None:
        self.steering.act(Action.LOWER)

    def action_retry(self) -> None:
        self.steering.act(Action.RETRY)

    def action_cancel(self) -> None:
        self.steering.act(Action.CANCEL)

    def action_approve(self) -> None:
        self.steering.act(Action.APPROVE)

    def action_defer(self) -> None:
        self.steering.defer()

    def action_reject(self) -> None:
        self.steering.reject()
