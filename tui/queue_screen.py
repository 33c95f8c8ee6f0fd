"""The queue screen (key 1): header, filter bar, live table, detail pane.

The screen turns keys into store writes through ``tui.steering`` and shows what
happened; its widgets only display what they are given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.widgets import DataTable, Input, Static

from tui.cells import COLUMNS, one_line
from tui.columns import needed
from tui.context import Context
from tui.detail import DetailPane
from tui.dialogs import ConfirmDialog, preview
from tui.filters import TaskFilter, parse_filter
from tui.forms import DeferForm, NewTaskForm, ReasonForm
from tui.header import STALE_AFTER_MS, STATUS_KEYS, StatusHeader
from tui.keybar import KeyBar
from tui.keys import APPROVE, CANCEL, DEFER, LOWER, RAISE, REJECT, RETRY
from tui.live import Banner, LiveScreen
from tui.loaders import QueueSnapshot, load_queue
from tui.ordering import SortBy, clicked_sort, next_sort, sort_rows
from tui.queue_notes import badges_text, empty_text, filter_note, inbox_folder
from tui.queue_table import QueueTable
from tui.safety import guarded
from tui.steering import Action, applies, apply_many, summarize
from tui.tabs import TabBar
from vigil.errors import InputError
from vigil.models import NewTask, Task, TaskStatus

DETAIL_PERCENT = 40  # the pane's width (DetailPane's CSS), and at least DETAIL_MIN cells
DETAIL_MIN = 30
DETAIL_SUBJECT_MIN = 24  # beside the pane, the table keeps at least this much subject
WRITE_ACTIONS = frozenset({"new_task", "raise", "lower", "defer", "cancel", "retry", "approve", "reject"})
TASK_ACTIONS = {"raise": Action.RAISE, "lower": Action.LOWER, "defer": Action.DEFER, "cancel": Action.CANCEL}
TASK_ACTIONS |= {"retry": Action.RETRY, "approve": Action.APPROVE, "reject": Action.REJECT}


class QueueScreen(LiveScreen[QueueSnapshot]):
    TITLE = "Queue"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "new_task", "New", tooltip="new task: a form checked as `vigil task add` checks it"),
        RAISE,
        LOWER,
        DEFER,
        CANCEL,
        RETRY,
        Binding("space", "mark", "Mark", tooltip="mark the row; the task keys then act on every marked task"),
        Binding("enter", "open", "Open", show=False, tooltip="open the task screen"),
        Binding("slash", "filter", "Filter", key_display="/", tooltip="filter as you type (words, status:, pri<3 …)"),
        Binding("p", "freeze", "Freeze", tooltip="freeze this view (not the loop: that is L); changes are counted"),
        # After the everyday keys: the footer drops keys from the end when it is narrow;
        # reject is in the help and the palette (and named in the approve confirmation).
        APPROVE,
        REJECT,
        Binding("f", "follow", "Follow", show=False, tooltip="keep the cursor on the running task"),
        Binding("i", "toggle_detail", "Detail", show=False, tooltip="show or hide the detail pane"),
        Binding("s", "sort", "Sort", show=False, tooltip="sort by priority, age, subject, source, cost, or dispatch"),
        Binding("escape", "clear", "Clear", show=False, tooltip="close the filter, else clear marks, else the filter"),
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
        self._detail_chosen: bool | None = None  # i shows or hides the pane; None: by width
        self._filter_error = ""  # why the text in the filter box does not parse ("" = it does)
        self.sort_by: SortBy | None = None  # None: the dispatcher's order

    def compose(self) -> ComposeResult:
        yield Banner()
        yield TabBar("queue")
        header = StatusHeader()
        # The dispatcher writes a heartbeat every [dispatch] heartbeat; three missed
        # ones (and at least a minute) mean it is gone.
        header.stale_after_ms = max(STALE_AFTER_MS, 3 * self.ctx.settings.dispatch.heartbeat_ms)
        yield header
        yield Input(id="filter", placeholder="filter: words status:failed source:sensor:inbox skill:web pri<3")
        yield Static(id="filter-note")
        yield Static(id="empty")
        with Horizontal(id="main"):
            yield QueueTable(id="queue")
            yield DetailPane(self.ctx.times, id="detail")
        yield KeyBar(self.ctx)

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self._fit_detail(self.app.size.width)
        self.set_interval(1.0, self.tick)
        self.query_one(QueueTable).focus()

    def on_resize(self, event: Resize) -> None:
        self._fit_detail(event.size.width)

    def _fit_detail(self, width: int) -> None:
        """Show the detail pane only where the table still fits beside it (its
        required columns, with a readable subject), until ``i`` decides."""
        if self._detail_chosen is None:
            pane = max(DETAIL_MIN, width * DETAIL_PERCENT // 100)
            self.query_one(DetailPane).display = width - pane >= needed(COLUMNS, DETAIL_SUBJECT_MIN)

    def times_changed(self) -> None:
        """Only the detail pane shows clock times; re-show it (no query, so a frozen
        view stays frozen); "today" follows at the next refresh."""
        self.query_one(DetailPane).show(self.table.current, self.ctx.clock.now_ms())

    # --- data -----------------------------------------------------------------------
    @property
    def table(self) -> QueueTable:
        return self.query_one(QueueTable)

    async def load(self) -> QueueSnapshot:
        now = self.ctx.clock.now_ms()
        today = self.ctx.times.start_of_day(now)
        return await load_queue(self.ctx.store, self.filter, now, today_ms=today, settings=self.ctx.settings)

    def apply(self, data: QueueSnapshot) -> None:
        snapshot: QueueSnapshot = data
        self.snapshot = snapshot
        now = self.ctx.clock.now_ms()
        header = self.query_one(StatusHeader)
        header.loop_label = self.ctx.loop_label
        header.selected = self.filter.statuses
        header.show(snapshot, now)
        self.table.reconcile(sort_rows(snapshot.tasks + snapshot.recent, self.sort_by), now, snapshot.next_id)
        self._show_empty(snapshot)
        self._show_badges()  # a marked task that left the table is no longer marked
        if self._select_after_load is not None and self.table.select_id(self._select_after_load):
            self._select_after_load = None
        elif self.following:
            self._follow_active()
        self._show_filter_note()

    def _show_filter_note(self) -> None:
        note = filter_note(self.snapshot, self.filter, self._filter_error, self.sort_by)
        self.query_one("#filter-note", Static).update(note)
        self.query_one("#filter-note", Static).display = bool(note.plain)

    def _show_empty(self, snapshot: QueueSnapshot) -> None:
        """Under the filter bar, when nothing is open: what to do next."""
        empty = self.query_one("#empty", Static)
        empty.display = not snapshot.tasks and self.filter.is_empty
        if empty.display:
            empty.update(empty_text(bool(snapshot.recent), inbox_folder(self.ctx.settings.sensors)))

    @guarded("updating times")
    def tick(self) -> None:
        now = self.ctx.clock.now_ms()
        header = self.query_one(StatusHeader)
        header.loop_label = self.ctx.loop_label
        header.tick(now)
        self.table.tick(now)

    def frozen_changed(self) -> None:
        self._show_badges()

    def _show_badges(self) -> None:
        """Beside the loop line: the freeze and the count of marked rows."""
        badges = badges_text(self.changes_waiting if self.frozen else None, len(self.table.marks))
        self.query_one(StatusHeader).set_badges(badges)

    @on(QueueTable.Highlighted)
    def _highlighted(self, event: QueueTable.Highlighted) -> None:
        task = event.task
        self.query_one(DetailPane).show(task, self.ctx.clock.now_ms())
        if task is not None and task.waiting_on:  # which tasks: one query, for this row only
            self.run_worker(self._show_dependencies(task), group="deps", exclusive=True, exit_on_error=False)
        self.refresh_bindings()

    @guarded("reading the dependencies")
    async def _show_dependencies(self, task: Task) -> None:
        depends_on = await self.ctx.store.dependencies(task.id)
        pane = self.query_one(DetailPane)
        if pane.shown is not None and pane.shown.id == task.id:  # still the highlighted one
            pane.show(task, self.ctx.clock.now_ms(), depends_on)

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

    @on(Input.Changed, "#filter")
    def _filter_typed(self, event: Input.Changed) -> None:
        """Filter as you type; text that does not parse yet (``pri<``) keeps the last
        good filter and says why under the box."""
        try:
            flt = parse_filter(event.value)
        except InputError as err:
            self._filter_error = str(err)
            self._show_filter_note()
            return
        self._filter_error = ""
        if flt.text != self.filter.text:
            self.set_filter(flt)
        else:
            self._show_filter_note()

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
        self.reload(even_frozen=True)

    def action_filter_status(self, status: str) -> None:
        self.set_filter(self.filter.with_status(TaskStatus(status)))

    def action_clear(self) -> None:
        box = self.query_one("#filter", Input)
        if box.display:
            box.display = False
            self._filter_error = ""  # the box is closed: the filter is the last good one
            self._show_filter_note()
            self.table.focus()
        elif self.table.marks:
            self.table.clear_marks()
            self._show_badges()
            self.refresh_bindings()
        elif not self.filter.is_empty:
            self.set_filter(TaskFilter())

    def action_mark(self) -> None:
        current = self.table.current_id
        if current is not None:
            self.table.toggle_mark(current)
            self.table.action_cursor_down()
            self._show_badges()
            self.refresh_bindings()

    def action_freeze(self) -> None:
        self.frozen = not self.frozen
        waiting, self.changes_waiting = self.changes_waiting, 0
        self.frozen_changed()
        if not self.frozen and waiting:
            self.reload()  # thawed: catch up on what was counted

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

    def action_sort(self) -> None:
        self._sort(next_sort(self.sort_by))

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        self._sort(clicked_sort(self.sort_by, str(event.column_key.value)))

    def _sort(self, sort_by: SortBy | None) -> None:
        """Re-order what is shown (no query: a frozen view stays frozen)."""
        self.sort_by = sort_by
        if self.snapshot is not None:
            self.apply(self.snapshot)

    def action_toggle_detail(self) -> None:
        detail = self.query_one(DetailPane)
        detail.display = self._detail_chosen = not detail.display

    def action_open(self) -> None:
        from tui.task_screen import TaskScreen

        current = self.table.current_id
        if current is not None:
            self.app.push_screen(TaskScreen(self.ctx, current))

    @on(QueueTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open()

    def action_new_task(self) -> None:
        self.app.push_screen(NewTaskForm(self.ctx.clock, self.ctx.settings.skills_dir), self._add_task)

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
        reports = await apply_many(self.ctx, action, targets, until_ms=until_ms, reason=reason)
        message, ok = summarize(reports)
        self.notify(message, severity="information" if ok else "warning", markup=False)
        if self.table.marks:
            self.table.clear_marks()
            self._show_badges()
        self.reload()
