"""The queue screen (key 1): header, filter bar, live table, detail pane.

The screen turns keys into store writes through ``tui.steering`` and shows what
happened; its widgets only display what they are given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Footer, Input, Static

from tui.cells import one_line
from tui.context import Context
from tui.detail import DetailPane
from tui.dialogs import ConfirmDialog, preview
from tui.filters import TaskFilter, parse_filter
from tui.forms import DeferForm, NewTaskForm, ReasonForm
from tui.header import STALE_AFTER_MS, STATUS_KEYS, StatusHeader
from tui.live import Banner, LiveScreen
from tui.loaders import LIVE_LIMIT, QueueSnapshot, load_queue
from tui.queue_table import QueueTable
from tui.safety import guarded
from tui.steering import Action, applies, apply_many, summarize
from vigil.errors import InputError
from vigil.models import NewTask, Task, TaskStatus

WRITE_ACTIONS = frozenset({"new_task", "raise", "lower", "defer", "cancel", "retry", "approve", "reject"})
TASK_ACTIONS = {"raise": Action.RAISE, "lower": Action.LOWER, "defer": Action.DEFER, "cancel": Action.CANCEL}
TASK_ACTIONS |= {"retry": Action.RETRY, "approve": Action.APPROVE, "reject": Action.REJECT}


class QueueScreen(LiveScreen):
    TITLE = "Queue"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "new_task", "New"),
        Binding("plus,equals_sign", "raise", "+Prio", key_display="+"),
        Binding("minus", "lower", "-Prio", key_display="-"),
        Binding("d", "defer", "Defer"),
        Binding("x", "cancel", "Cancel"),
        Binding("r", "retry", "Retry"),
        Binding("space", "mark", "Mark"),
        Binding("enter", "open", "Open", show=False),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("p", "pause", "Pause"),
        # After the everyday keys, so an 80-column footer still shows those; reject is
        # in the help and the palette (and named in the approve confirmation).
        Binding("a", "approve", "Approve"),
        Binding("R", "reject", "Reject", show=False),
        Binding("f", "follow", "Follow", show=False),
        Binding("i", "toggle_detail", "Detail", show=False),
        Binding("escape", "clear", "Clear", show=False),
        *[
            Binding(key, f"filter_status('{status}')", f"Only {status}", show=False)
            for status, key in STATUS_KEYS.items()
        ],
    ]

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx, name="queue")
        self.filter = TaskFilter()
        self.following = False
        self.snapshot: QueueSnapshot | None = None
        self._select_after_load: int | None = None  # a task just added: highlight it

    def compose(self) -> ComposeResult:
        yield Banner()
        header = StatusHeader()
        # The dispatcher writes a heartbeat every [dispatch] heartbeat; three missed
        # ones (and at least a minute) mean it is gone.
        header.stale_after_ms = max(STALE_AFTER_MS, 3 * self.ctx.settings.dispatch.heartbeat_ms)
        yield header
        yield Input(id="filter", placeholder="filter: words status:failed source:sensor:inbox skill:web pri<3")
        yield Static(id="filter-note")
        with Horizontal(id="main"):
            yield QueueTable(id="queue")
            yield DetailPane(id="detail")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        # The table needs ~100 columns; below 130 the detail pane starts hidden (i shows it).
        self.query_one(DetailPane).display = self.app.size.width >= 130
        self.set_interval(1.0, self.tick)
        self.query_one(QueueTable).focus()

    # --- data -----------------------------------------------------------------------
    @property
    def table(self) -> QueueTable:
        return self.query_one(QueueTable)

    async def load(self) -> QueueSnapshot:
        return await load_queue(self.ctx.store, self.filter, self.ctx.clock.now_ms())

    def apply(self, data: Any) -> None:
        snapshot: QueueSnapshot = data
        self.snapshot = snapshot
        now = self.ctx.clock.now_ms()
        header = self.query_one(StatusHeader)
        header.loop_label = self.ctx.loop_label
        header.selected = self.filter.statuses
        header.show(snapshot, now)
        self.table.reconcile(snapshot.tasks, now, snapshot.next_id)
        if self._select_after_load is not None and self.table.select_id(self._select_after_load):
            self._select_after_load = None
        elif self.following:
            self._follow_active()
        note = Text()
        if snapshot.limited:
            note.append(f"showing the first {LIVE_LIMIT} rows; narrow with / to see others", style="yellow")
        if not self.filter.is_empty:
            note.append(f"  filter: {self.filter.text}  ({len(snapshot.tasks)} shown, esc clears)", style="dim")
        self.query_one("#filter-note", Static).update(note)
        self.query_one("#filter-note", Static).display = bool(note.plain)

    @guarded("updating times")
    def tick(self) -> None:
        now = self.ctx.clock.now_ms()
        header = self.query_one(StatusHeader)
        header.loop_label = self.ctx.loop_label
        header.tick(now)
        self.table.tick(now)

    def paused_changed(self) -> None:
        badge = Text()
        if self.live_paused:
            badge.append(" PAUSED ", style="bold black on yellow")
            badge.append(f" {self.changes_waiting} changes waiting", style="yellow")
        self.query_one(StatusHeader).set_badges(badge)

    @on(QueueTable.Highlighted)
    def _highlighted(self, event: QueueTable.Highlighted) -> None:
        self.query_one(DetailPane).show(event.task, self.ctx.clock.now_ms())
        self.refresh_bindings()

    # --- which keys apply -------------------------------------------------------------
    def _targets(self) -> list[Task]:
        """Marked tasks if any, else the highlighted one."""
        table = self.table
        if table.marks:
            return [table.tasks[i] for i in table.order if i in table.marks]
        current = table.current
        return [] if current is None else [current]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in WRITE_ACTIONS and self.ctx.readonly:
            return False  # hidden: a read-only TUI never writes
        if action in TASK_ACTIONS:
            targets = self._targets()
            return True if any(applies(TASK_ACTIONS[action], t) for t in targets) else None
        if action in ("mark", "open"):
            return True if self.table.current is not None else None
        return True

    # --- actions ----------------------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.value = self.filter.text
        box.focus()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        try:
            self.set_filter(parse_filter(event.value))
        except InputError as err:
            self.notify(str(err), title="filter", severity="error", markup=False)
            return
        event.input.display = False
        self.table.focus()

    def set_filter(self, flt: TaskFilter) -> None:
        self.filter = flt
        self.reload()

    def action_filter_status(self, status: str) -> None:
        self.set_filter(self.filter.with_status(TaskStatus(status)))

    def action_clear(self) -> None:
        box = self.query_one("#filter", Input)
        if box.display:
            box.display = False
            self.table.focus()
        elif self.table.marks:
            self.table.clear_marks()
            self.refresh_bindings()
        elif not self.filter.is_empty:
            self.set_filter(TaskFilter())

    def action_mark(self) -> None:
        current = self.table.current_id
        if current is not None:
            self.table.toggle_mark(current)
            self.table.action_cursor_down()
            self.refresh_bindings()

    def action_pause(self) -> None:
        self.live_paused = not self.live_paused
        waiting, self.changes_waiting = self.changes_waiting, 0
        self.paused_changed()
        if not self.live_paused and waiting:
            self.reload()

    def action_follow(self) -> None:
        self.following = not self.following
        self.notify("following the active task" if self.following else "stopped following", markup=False)
        if self.following:
            self._follow_active()

    def _follow_active(self) -> None:
        for task_id in self.table.order:
            if self.table.tasks[task_id].status is TaskStatus.ACTIVE:
                self.table.select_id(task_id)
                return

    def action_toggle_detail(self) -> None:
        detail = self.query_one(DetailPane)
        detail.display = not detail.display

    def action_open(self) -> None:
        from tui.task_screen import TaskScreen

        current = self.table.current_id
        if current is not None:
            self.app.push_screen(TaskScreen(self.ctx, current))

    @on(QueueTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open()

    def action_new_task(self) -> None:
        self.app.push_screen(NewTaskForm(self.ctx.clock), self._add_task)

    def _add_task(self, new: NewTask | None) -> None:
        if new is not None:
            self.run_worker(self._write_new(new), group="write", exit_on_error=False)

    @guarded("adding the task")
    async def _write_new(self, new: NewTask) -> None:
        result = await self.ctx.store.add_task(new, actor="human")
        if result.created:
            self.notify(f"created task #{result.task_id}", markup=False)
        else:
            self.notify(f"not created: task #{result.task_id} already has key {new.source_key!r}", markup=False)
        self._select_after_load = result.task_id
        self.reload()

    def action_raise(self) -> None:
        self._run_on_targets(Action.RAISE, confirm_bulk=True)

    def action_lower(self) -> None:
        self._run_on_targets(Action.LOWER, confirm_bulk=True)

    def action_retry(self) -> None:
        self._run_on_targets(Action.RETRY, confirm_bulk=True)

    def action_cancel(self) -> None:
        self._run_on_targets(Action.CANCEL, confirm_bulk=True, confirm_one=True)

    def action_defer(self) -> None:
        targets, _ = self._split(Action.DEFER)
        if not targets:
            return
        what = Text(f"#{targets[0].id} {one_line(targets[0].subject, 50)}" if len(targets) == 1 else "")
        if len(targets) > 1:
            what = Text(f"{len(targets)} marked tasks")

        def chosen(until: int | None) -> None:
            if until is not None:
                self._confirm_then_write(Action.DEFER, until_ms=until, confirm=len(targets) > 1)

        self.app.push_screen(DeferForm(self.ctx.clock, what), chosen)

    def action_approve(self) -> None:
        # Confirmed even for one task: approval lets work run that waited for a person.
        self._run_on_targets(Action.APPROVE, confirm_bulk=True, confirm_one=True)

    def action_reject(self) -> None:
        targets, skipped = self._split(Action.REJECT)
        if not targets:
            return
        label = f"#{targets[0].id}" if len(targets) == 1 else f"{len(targets)} tasks"
        title = Text(f"Reject {label}? It is canceled, with the reason.", style="bold")

        def answered(reason: str | None) -> None:
            if reason:
                self._write(Action.REJECT, targets, None, reason)

        form = ReasonForm(
            title,
            label="Reason (kept in the task's summary and audit trail)",
            required=True,
            details=preview(targets, skipped),
        )
        self.app.push_screen(form, answered)

    def _split(self, action: Action) -> tuple[list[Task], list[Task]]:
        targets = self._targets()
        return [t for t in targets if applies(action, t)], [t for t in targets if not applies(action, t)]

    def _run_on_targets(self, action: Action, *, confirm_bulk: bool, confirm_one: bool = False) -> None:
        bulk = bool(self.table.marks)
        self._confirm_then_write(action, confirm=(bulk and confirm_bulk) or (not bulk and confirm_one))

    def _confirm_then_write(self, action: Action, *, confirm: bool, until_ms: int | None = None) -> None:
        targets, skipped = self._split(action)
        if not targets:
            return
        if not confirm:
            self._write(action, targets, until_ms)
            return
        verb = {Action.CANCEL: "Cancel", Action.RAISE: "Raise the priority of", Action.LOWER: "Lower the priority of"}
        words = verb.get(action, str(action).capitalize())
        label = f"#{targets[0].id}" if len(targets) == 1 else f"{len(targets)} tasks"
        question = Text(f"{words} {label}?", style="bold")
        if action is Action.CANCEL and any(t.status is TaskStatus.ACTIVE for t in targets):
            question.append("\nA running task gets a cancel request; the dispatcher stops it.", style="yellow")
        if action is Action.APPROVE:
            question.append("\nIt becomes pending and runs when due. (R rejects it instead.)", style="yellow")

        def answered(yes: bool | None) -> None:
            if yes:
                self._write(action, targets, until_ms)

        self.app.push_screen(ConfirmDialog(question, preview(targets, skipped)), answered)

    def _write(self, action: Action, targets: Sequence[Task], until_ms: int | None, reason: str | None = None) -> None:
        work = self._apply_write(action, list(targets), until_ms, reason)
        self.run_worker(work, group="write", exit_on_error=False)

    @guarded("changing tasks")
    async def _apply_write(self, action: Action, targets: list[Task], until_ms: int | None, reason: str | None) -> None:
        reports = await apply_many(self.ctx.store, action, targets, until_ms=until_ms, reason=reason)
        message, ok = summarize(reports)
        self.notify(message, severity="information" if ok else "warning", markup=False)
        if self.table.marks:
            self.table.clear_marks()
        self.reload()
