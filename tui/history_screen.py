"""The history screen (key 3): finished, failed and canceled tasks, newest first.

Pages come from SQL with keyset paging (``before_id`` = the last id shown), so
the millionth task costs what the first does. Moving past the last row loads the
next page. Typing in the search box searches subject, description, source and
result (``Store.search_tasks``), paged the same way.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Input, Static

from tui.cells import STATUS_STYLE, money, one_line, relative
from tui.context import Context
from tui.live import Banner, LiveScreen
from tui.loaders import HISTORY_PAGE, load_history_page
from tui.safety import guarded
from tui.steering import Action, applies, apply_many, summarize
from vigil.models import Task


class HistoryScreen(LiveScreen):
    TITLE = "History"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search", key_display="/"),
        Binding("m", "more", "More"),
        Binding("r", "retry", "Retry"),
        Binding("enter", "open", "Open", show=False),
        Binding("escape", "clear", "Clear", show=False),
    ]

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx, name="history")
        self.query_text = ""
        self.rows: list[Task] = []
        self.exhausted = False

    def compose(self) -> ComposeResult:
        yield Banner()
        yield Input(id="search", placeholder="search finished tasks (enter)")
        yield DataTable[Text](id="history", cursor_type="row", zebra_stripes=True)
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key in ("id", "status", "pri", "subject", "source", "finished", "tries", "cost"):
            table.add_column(key, key=key)
        table.focus()

    async def load(self) -> tuple[Task, ...]:
        return await load_history_page(self.ctx.store, self.query_text, before_id=None)

    def apply(self, data: Any) -> None:
        """A fresh first page (search changed, screen shown, or data changed)."""
        first: tuple[Task, ...] = data
        table = self.query_one(DataTable)
        if len(self.rows) > HISTORY_PAGE and self.rows and first and first[-1].id >= self.rows[0].id:
            return  # deep in older pages and nothing new on top: keep the reader's place
        keep = table.cursor_row
        table.clear()
        self.rows = []
        self._append(first)
        table.move_cursor(row=min(keep, max(0, len(self.rows) - 1)), animate=False)

    def _append(self, tasks: tuple[Task, ...]) -> None:
        table = self.query_one(DataTable)
        now = self.ctx.clock.now_ms()
        for task in tasks:
            table.add_row(
                Text(str(task.id), justify="right"),
                Text(str(task.status), style=STATUS_STYLE[task.status]),
                Text(str(task.priority)),
                Text(one_line(task.subject, 60)),
                Text(one_line(task.source, 20), style="dim"),
                Text(relative(task.completed_at, now) if task.completed_at else "—"),
                Text(f"{task.attempt_count}/{task.max_retries + 1}"),
                Text(money(task.cost_usd) if task.cost_usd else ""),
                key=str(task.id),
            )
        self.rows.extend(tasks)
        self.exhausted = len(tasks) < HISTORY_PAGE
        more = "end of history" if self.exhausted else "m or ↓ at the bottom loads more"
        found = f"search {self.query_text!r}: " if self.query_text else ""
        self.query_one("#status", Static).update(Text(f"{found}{len(self.rows)} shown · {more}", style="dim"))

    def action_more(self) -> None:
        if self.exhausted or not self.rows:
            return
        self.run_worker(self._more(self.rows[-1].id), group="more", exclusive=True, exit_on_error=False)

    async def _more(self, before_id: int) -> None:
        page = await load_history_page(self.ctx.store, self.query_text, before_id=before_id)
        if self.is_attached and self.rows and self.rows[-1].id == before_id:
            self._append(page)

    @on(DataTable.RowHighlighted)
    def _at_bottom(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row >= len(self.rows) - 1:
            self.action_more()
        self.refresh_bindings()

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    @on(Input.Submitted, "#search")
    def _searched(self, event: Input.Submitted) -> None:
        self.query_text = event.value.strip()
        self.rows = []
        self.query_one(DataTable).focus()
        self.reload()

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
        from tui.task_screen import TaskScreen

        if self.current is not None:
            self.app.push_screen(TaskScreen(self.ctx, self.current.id))

    @on(DataTable.RowSelected)
    def _selected(self) -> None:
        self.action_open()

    def action_retry(self) -> None:
        current = self.current
        if current is not None and applies(Action.RETRY, current):
            self.run_worker(self._retry(current), group="write", exit_on_error=False)

    @guarded("retrying")
    async def _retry(self, task: Task) -> None:
        message, ok = summarize(await apply_many(self.ctx.store, Action.RETRY, [task]))
        self.notify(message, severity="information" if ok else "warning", markup=False)
        self.rows = []
        self.reload()
