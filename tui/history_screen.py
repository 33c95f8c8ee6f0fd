"""The history screen (key 3): completed, failed and canceled tasks, the latest
finish first.

Pages come from SQL with keyset paging on (finish time, id) (``before`` = the
last row shown), so the millionth task costs what the first does. Moving past the
last row loads the next page. The search box searches subject, description,
source and result as you type (``Store.finished_tasks``), paged the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.widgets import DataTable, Input, Static

from tui.cells import cut, money
from tui.columns import Column, fit
from tui.context import Context
from tui.keybar import KeyBar
from tui.keys import RETRY
from tui.live import Banner, LiveScreen
from tui.loaders import HISTORY_PAGE, load_history_page
from tui.queue_table import JumpTable
from tui.safety import guarded
from tui.steering import Action, applies
from tui.tabs import LoopLine, TabBar
from tui.task_actions import TaskActions
from tui.times import relative
from vigil.models import Task, TaskStatus
from vigil.states import state_of

HISTORY_COLUMNS = (
    Column("id", "id", 2),
    Column("status", "status", 9),
    Column("pri", "pri", 3),
    Column("subject", "subject", 0),
    Column("source", "source", 12),
    Column("finished", "finished", 9),
    Column("result", "result / error", 24, optional=True),
    Column("tries", "tries", 5, optional=True),
    Column("cost", "cost", 7, optional=True),
)


def history_cells(task: Task, now_ms: int) -> dict[str, Text]:
    """Every column's cell for one finished task, keyed like ``HISTORY_COLUMNS``;
    ``result`` is the summary, in red for a failed task (its error)."""
    failed = task.status is TaskStatus.FAILED
    return {
        "id": Text(str(task.id), justify="right"),
        "status": Text(state_of(task).cell, style=state_of(task).style),
        "pri": Text(str(task.priority), justify="right"),
        "subject": cut(task.subject),
        "source": cut(task.source, "dim"),
        "finished": Text(relative(task.completed_at, now_ms) if task.completed_at else "—"),
        "result": cut(task.result_summary or "", "red" if failed else "dim"),
        "tries": Text(f"{task.attempt_count}/{task.max_retries + 1}", justify="right"),
        "cost": Text(money(task.cost_usd) if task.cost_usd else "", justify="right"),
    }


class HistoryScreen(LiveScreen[tuple[Task, ...]]):
    TITLE = "History"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search", key_display="/", tooltip="search subject, description, source, result"),
        Binding("m", "more", "More", tooltip="load the next page of older tasks"),
        RETRY,
        Binding("enter", "open", "Open", show=False, tooltip="open the task screen"),
        Binding("escape", "clear", "Clear", show=False, tooltip="clear the search"),
    ]

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx, name="history")
        self.query_text = ""
        self.rows: list[Task] = []
        self.exhausted = False
        self._layout: list[tuple[str, str, int]] = []
        self.steering = TaskActions(self, self._highlighted, lambda: False, self._retried)

    def compose(self) -> ComposeResult:
        yield Banner()
        yield TabBar("history", self.ctx.home_label)
        yield LoopLine(self.ctx)
        yield Input(id="search", placeholder="search finished tasks (as you type)")
        yield JumpTable(id="history", cursor_type="row", zebra_stripes=True)
        yield Static(id="status")
        yield KeyBar(self.ctx)

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.relayout(self.app.size.width)

    def on_resize(self, event: Resize) -> None:
        self.relayout(event.size.width)

    def relayout(self, width: int) -> None:
        """Fit the columns to ``width`` (the subject takes what is left; result,
        tries and cost show when there is room; the id column as wide as the
        longest id shown); rebuild the rows if they change."""
        id_width = max(2, len(str(max((t.id for t in self.rows), default=0))))
        columns = [replace(c, width=id_width) if c.key == "id" else c for c in HISTORY_COLUMNS]
        layout = fit(columns, width, flex_min=16, flex_max=70, flex_keep=24)
        if layout == self._layout:
            return
        self._layout = layout
        table = self.query_one(DataTable)
        keep = table.cursor_row
        table.clear(columns=True)
        for key, label, cells in layout:
            table.add_column(label, key=key, width=cells)
        self._add_rows(self.rows)
        table.move_cursor(row=min(keep, max(0, len(self.rows) - 1)), animate=False)

    async def load(self) -> tuple[Task, ...]:
        return await load_history_page(self.ctx.store, self.query_text, before=None)

    def apply(self, data: tuple[Task, ...]) -> None:
        """A fresh first page (search changed, screen shown, or data changed)."""
        first: tuple[Task, ...] = data
        table = self.query_one(DataTable)
        if len(self.rows) > HISTORY_PAGE and first and _place(first[-1]) >= _place(self.rows[0]):
            return  # deep in older pages and nothing new on top: keep the reader's place
        keep = table.cursor_row
        table.clear()
        self.rows = []
        self._append(first)
        table.move_cursor(row=min(keep, max(0, len(self.rows) - 1)), animate=False)

    def _add_rows(self, tasks: Sequence[Task]) -> None:
        table = self.query_one(DataTable)
        now = self.ctx.clock.now_ms()
        keys = [key for key, _, _ in self._layout]
        for task in tasks:
            cells = history_cells(task, now)
            table.add_row(*(cells[key] for key in keys), key=str(task.id))

    def _append(self, tasks: tuple[Task, ...]) -> None:
        self.rows.extend(tasks)
        widest = max((len(str(t.id)) for t in self.rows), default=2)
        if self._layout and widest > dict((k, w) for k, _, w in self._layout)["id"]:
            self._layout = []  # a longer id than the column holds: rebuild (adds the rows)
            self.relayout(self.size.width or self.app.size.width)
        else:
            self._add_rows(tasks)
        self.exhausted = len(tasks) < HISTORY_PAGE
        more = "end of history" if self.exhausted else "m or ↓ at the bottom loads more"
        found = f"search {self.query_text!r}: " if self.query_text else ""
        self.query_one("#status", Static).update(Text(f"{found}{len(self.rows)} shown · {more}", style="dim"))

    def action_more(self) -> None:
        if self.exhausted or not self.rows:
            return
        self.run_worker(self._more(_place(self.rows[-1])), group="more", exclusive=True, exit_on_error=False)

    @guarded("loading more history")
    async def _more(self, before: tuple[int, int]) -> None:
        page = await load_history_page(self.ctx.store, self.query_text, before=before)
        if self.is_attached and self.rows and _place(self.rows[-1]) == before:
            self._append(page)

    @on(DataTable.RowHighlighted)
    def _at_bottom(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row >= len(self.rows) - 1:
            self.action_more()
        self.refresh_bindings()

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    @on(Input.Changed, "#search")
    def _typed(self, event: Input.Changed) -> None:
        """Search as you type, as the queue filters (a result in flight for older
        text is dropped)."""
        text = event.value.strip()
        if text != self.query_text:
            self.query_text = text
            self.rows = []
            self.reload(discard_running=True)

    @on(Input.Submitted, "#search")
    def _searched(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def action_clear(self) -> None:
        if self.query_text:
            self.query_one("#search", Input).value = ""
            self.query_text = ""
            self.rows = []
            self.reload()

    @property
    def current(self) -> Task | None:
        row = self.query_one(DataTable).cursor_row
        return self.rows[row] if 0 <= row < len(self.rows) else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "retry":
            if self.ctx.readonly:
                return False
            current = self.current
            return True if current is not None and applies(Action.RETRY, current) else None
        return True

    def action_open(self) -> None:
        from tui.task_screen import open_task

        if self.current is not None:
            open_task(self.app, self.ctx, self.current.id)

    @on(DataTable.RowSelected)
    def _selected(self) -> None:
        self.action_open()

    def _highlighted(self) -> list[Task]:
        return [] if self.current is None else [self.current]

    def action_retry(self) -> None:
        self.steering.act(Action.RETRY)

    def _retried(self) -> None:
        self.rows = []  # the retried task leaves the history: read it again from the top
        self.reload()


def _place(task: Task) -> tuple[int, int]:
    """Where a finished task stands in the history: (finish time, id)."""
    return (task.completed_at or 0, task.id)
