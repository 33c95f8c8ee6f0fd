"""The queue screen (key 1): header, filter bar, live table, detail pane.

The table is a window on the whole store: the screen's filter and sort are a
``TaskQuery`` the store answers (``Store.task_window``), and the table holds
``WINDOW_ROWS`` rows of the answer from ``window_start``, moved past its edges
(``tui.queue_window``). The screen turns keys into store writes through the
actions object it owns (``tui.task_actions.TaskActions``) and shows what
happened; its widgets only display what they are given.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.widgets import DataTable, Input, Static

from tui.cells import COLUMNS
from tui.columns import needed
from tui.context import Context
from tui.detail import DetailPane
from tui.filters import TaskFilter, parse_filter
from tui.forms import NewTaskForm
from tui.header import StatusHeader
from tui.keybar import KeyBar
from tui.keys import APPROVE, CANCEL, DEFER, LOWER, RAISE, REJECT, RETRY
from tui.live import Banner, LiveScreen
from tui.loaders import QueueSnapshot, load_queue
from tui.loop_state import probe_lanes
from tui.ordering import SortBy, clicked_sort, next_sort
from tui.queue_notes import badges_text, empty_text, inbox_folder, window_note
from tui.queue_table import QueueTable
from tui.queue_window import Landing, land, past_edge
from tui.safety import guarded
from tui.steering import KEY_ACTIONS, Action, applies
from tui.tabs import TabBar
from tui.task_actions import TaskActions
from vigil.errors import InputError
from vigil.models import NewTask, Task, TaskStatus
from vigil.states import TASK_STATES
from vigil.task_query import Sort

DETAIL_PERCENT = 40  # the pane's width (DetailPane's CSS), and at least DETAIL_MIN cells
DETAIL_MIN = 30
DETAIL_SUBJECT_MIN = 24  # beside the pane, the table keeps at least this much subject
WRITE_ACTIONS = frozenset({"new_task", "raise", "lower", "defer", "cancel", "retry", "approve", "reject"})


class QueueScreen(LiveScreen[QueueSnapshot]):
    TITLE = "Queue"

    BINDINGS: ClassVar[list[BindingType]] = [
        # A priority binding runs as the key arrives, before the keys typed after it
        # are passed on: they reach the form's subject box, not this screen.
        Binding(
            "n", "new_task", "New", priority=True, tooltip="new task: a form checked as `vigil task add` checks it"
        ),
        RAISE,
        LOWER,
        DEFER,
        CANCEL,
        RETRY,
        Binding("space", "mark", "Mark", tooltip="mark the row; the task keys then act on every marked task"),
        Binding("enter", "open", "Open", show=False, tooltip="open the task screen"),
        Binding("slash", "filter", "Filter", key_display="/", tooltip="filter as you type (words, status:, pri<3 …)"),
        Binding("p", "freeze", "Freeze", tooltip="freeze this view (not the loop: that is L); changes are counted"),
        APPROVE,
        REJECT,
        Binding("f", "follow", "Follow", show=False, tooltip="keep the cursor on the running task"),
        Binding("i", "toggle_detail", "Detail", show=False, tooltip="show or hide the detail pane"),
        Binding("s", "sort", "Sort", show=False, tooltip="sort by priority, age, subject, source, cost, or dispatch"),
        Binding("escape", "clear", "Clear", show=False, tooltip="close the filter, else clear marks, else the filter"),
        *[
            Binding(
                state.key,
                f"filter_state('{state.name}')",
                f"Only {state.name}",
                show=False,
                tooltip=f"only the tasks that are {state.words}",
            )
            for state in TASK_STATES
        ],
    ]

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx, name="queue")
        self.filter = TaskFilter()
        self.following = False
        self.snapshot: QueueSnapshot | None = None
        self.sort_by: SortBy | None = None  # None: the dispatcher's order
        self.window_start = 0  # the window's first row in the whole answer
        self._land: Landing | None = None  # where the cursor goes after the next load
        self._select_after_load: int | None = None  # a task just added: highlight it
        self._detail_chosen: bool | None = None  # i shows or hides the pane; None: by width
        self._filter_error = ""  # why the text in the filter box does not parse ("" = it does)
        self._view_only = False  # the next load follows a change of the view alone (not of the data)
        self.steering = TaskActions(self, self.targets, lambda: bool(self.table.marks), self._written)

    def compose(self) -> ComposeResult:
        yield Banner()
        yield TabBar("queue", self.ctx.home_label)
        yield StatusHeader()
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

    @property
    def _unsorted_view(self) -> bool:
        """The default view: no filter, the dispatcher's order (it also shows what
        just finished, dimmed, at its end)."""
        return self.filter.is_empty and self.sort_by is None

    def data_changed(self) -> None:
        self._view_only = False
        super().data_changed()

    async def load(self) -> QueueSnapshot:
        now = self.ctx.clock.now_ms()
        sort, descending = self.sort_by or (Sort.QUEUE, False)
        # A change of the view alone (filter, sort, window) reads only the window.
        view_of = self.snapshot if self._view_only else None
        self._view_only = False
        return await load_queue(
            self.ctx.store,
            self.filter.query(sort, descending=descending),
            now,
            offset=self.window_start,
            heartbeat_ms=self.ctx.settings.dispatch.heartbeat_ms,
            today_ms=self.ctx.times.start_of_day(now),
            with_recent=self._unsorted_view,
            view_of=view_of,
            settings=self.ctx.settings,
            lock=await probe_lanes(self.ctx.settings),
        )

    def apply(self, data: QueueSnapshot) -> None:
        snapshot, before = data, self.snapshot
        self.snapshot = snapshot
        window = snapshot.window
        self.window_start = window.offset  # the store moved a window past the end back to the last page
        now = self.ctx.clock.now_ms()
        header = self.query_one(StatusHeader)
        header.loop_label = self.ctx.loop_label
        header.selected = tuple(s.name for s in self.filter.states)
        header.show(snapshot, now)
        rows = window.tasks + (window.recent if self._unsorted_view and not window.after else ())
        moved = before is None or before.window.offset != window.offset or before.query != snapshot.query
        landing, self._land = self._land, None
        select = self._select_after_load
        if landing is not None and landing[0] == "id":
            select = landing[1]
        self.table.reconcile(rows, now, window.next_id, moved=moved, select=select)
        if select is not None and select == self._select_after_load and select in self.table.tasks:
            self._select_after_load = None
        if landing is not None:
            land(self.table, landing)
        elif self.following:
            self._follow_active()
        self._show_empty(snapshot)
        self.show_badges()  # a marked task that left the list is no longer marked
        self._show_filter_note()

    def _show_filter_note(self) -> None:
        note = window_note(self.snapshot, self.filter, self._filter_error, self.sort_by)
        self.query_one("#filter-note", Static).update(note)
        self.query_one("#filter-note", Static).display = bool(note.plain)

    def _show_empty(self, snapshot: QueueSnapshot) -> None:
        """Under the filter bar, when nothing is open: what to do next."""
        empty = self.query_one("#empty", Static)
        empty.display = not snapshot.tasks and self.filter.is_empty
        if empty.display:
            inbox = inbox_folder(self.ctx.settings.sensors)
            empty.update(empty_text(bool(snapshot.recent), inbox, readonly=self.ctx.readonly))

    @guarded("updating times")
    def tick(self) -> None:
        now = self.ctx.clock.now_ms()
        header = self.query_one(StatusHeader)
        header.loop_label = self.ctx.loop_label
        header.tick(now)
        self.table.tick(now)

    def frozen_changed(self) -> None:
        self.show_badges()

    def refresh_failing(self, err: Exception) -> None:
        note = self.query_one("#filter-note", Static)
        note.update(f"refresh failed ({type(err).__name__}: {err}); trying again")
        note.display = True

    def refresh_recovered(self) -> None:
        self._show_filter_note()

    def show_badges(self) -> None:
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

    # --- the window -------------------------------------------------------------------
    @on(QueueTable.Edge)
    def _edge(self, event: QueueTable.Edge) -> None:
        """The cursor went past an edge of the window: move it if there is more."""
        if self.snapshot is None:
            return
        moved = past_edge(self.snapshot.window, event.where, self.table.current_id)
        if moved is None:
            if event.where in ("first", "last"):
                self.table.jump_within(event.where)  # that end is in the window already
            return
        self.window_start, landing = moved
        self._move_window(landing)

    def _move_window(self, landing: Landing) -> None:
        self._land = landing
        self._view_changed()

    def _view_changed(self) -> None:
        """The person changed the view (filter, sort, window): it loads, frozen or
        not, and only the window is read again."""
        self._view_only = self.snapshot is not None and not self._loading
        self.reload(even_frozen=True)

    # --- which keys apply -------------------------------------------------------------
    def targets(self) -> list[Task]:
        """Marked tasks if any (those in view in table order, then the others), else
        the highlighted one."""
        table = self.table
        if table.marks:
            shown = [table.tasks[i] for i in table.order if i in table.marks]
            return shown + [task for i, task in table.marked.items() if i not in table.tasks]
        current = table.current
        return [] if current is None else [current]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in WRITE_ACTIONS and self.ctx.readonly:
            return False  # hidden: a read-only TUI never writes
        if action == "new_task" and isinstance(self.focused, Input):
            return False  # n typed in the filter box is a letter
        if action in KEY_ACTIONS:
            return True if any(applies(KEY_ACTIONS[action], t) for t in self.targets()) else None
        if action in ("mark", "open"):
            return True if self.table.current is not None else None
        return True

    # --- actions ----------------------------------------------------------------------
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

    def _written(self) -> None:
        """After a write from a task key: marks cleared, the queue read again."""
        if self.table.marks:
            self.table.clear_marks()
            self.show_badges()
        self.reload()

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
        """A new filter: the store answers it from its first row."""
        self.filter = flt
        self.window_start = 0
        self._view_changed()

    def action_filter_state(self, name: str) -> None:
        self.set_filter(self.filter.with_state(name))

    def action_clear(self) -> None:
        box = self.query_one("#filter", Input)
        if box.display:
            box.display = False
            self._filter_error = ""  # the box is closed: the filter is the last good one
            self._show_filter_note()
            self.table.focus()
        elif self.table.marks:
            self.table.clear_marks()
            self.show_badges()
            self.refresh_bindings()
        elif not self.filter.is_empty:
            self.set_filter(TaskFilter())

    def action_mark(self) -> None:
        current = self.table.current_id
        if current is not None:
            self.table.toggle_mark(current)
            self.table.action_cursor_down()
            self.show_badges()
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
        """The store sorts every task that matches; the window starts again at the
        top, on the highlighted task if it is there."""
        if sort_by == self.sort_by:
            return
        self.sort_by = sort_by
        self.window_start = 0
        self._move_window(("id", self.table.current_id))

    def action_toggle_detail(self) -> None:
        detail = self.query_one(DetailPane)
        detail.display = self._detail_chosen = not detail.display

    def action_open(self) -> None:
        from tui.task_screen import open_task

        current = self.table.current_id
        if current is not None:
            open_task(self.app, self.ctx, current)

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
        result = await self.ctx.store.add_task(new, actor=self.ctx.actor)
        if result.created:
            self.notify(f"created task #{result.task_id}", markup=False)
        else:
            self.notify(f"not created: task #{result.task_id} already has key {new.source_key!r}", markup=False)
        self._select_after_load = result.task_id
        self.reload()
