"""The live task table, reconciled by task id.

The table holds one window of the queue screen's query (``WINDOW_ROWS`` rows).
A new snapshot never clears the table: rows whose task changed are updated cell by
cell, new tasks are added, gone tasks removed, and the rows are then put in the
snapshot's order. The cursor and the marks follow task ids, so the highlighted
task stays highlighted when another process inserts a more urgent task above it.
Moving past the first or last row asks the screen to move the window (``Edge``).
A change that fails half way rebuilds the rows: the table never stays stale. When
many rows leave at once (a fast drain), the rows are put back rather than removed
one by one (Textual renumbers every row at each removal); the cursor and the
marks still follow their tasks, and nothing is painted in between.

The columns fit the table's width (``tui.columns``): when the width changes (or
the longest id grows), the table is rebuilt from the cells it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from tui.cells import COLUMNS, SUBJECT_KEEP, SUBJECT_MAX, SUBJECT_MIN, task_cells, when_cell
from tui.columns import fit
from tui.context import log
from vigil.models import Task

BULK_LEAVING = 16  # more rows than this leaving at once: the rows are put back, not removed one by one


class JumpTable(DataTable[Text]):
    """A row table where ``g``/``Home`` and ``G``/``End`` go to the first and last row.

    Its columns have fixed widths (``tui.columns``) and its rows one line each, so
    the rows it adds are not measured: Textual's table measures every cell of
    every new row (for widths and heights these tables never use), which was most
    of a refresh's cost. (A private method of Textual, pinned in pyproject.)"""

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        super()._update_dimensions(())  # the virtual size only

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g,home", "jump('first')", "First row", show=False, tooltip="go to the first row"),
        Binding("G,end", "jump('last')", "Last row", show=False, tooltip="go to the last row"),
    ]

    def action_jump(self, where: str) -> None:
        if self.row_count:
            self.move_cursor(row=0 if where == "first" else self.row_count - 1, animate=False)


class QueueTable(JumpTable):
    """Rows keyed by ``str(task.id)``: one window of the screen's query. ``marks``
    holds marked task ids (a marked task keeps its mark while the window moves
    elsewhere; ``marked`` has its last known state)."""

    class Highlighted(Message):
        """The highlighted task changed (None: the table is empty)."""

        def __init__(self, task: Task | None) -> None:
            super().__init__()
            self.task = task

    class Edge(Message):
        """The cursor tried to move past the first or last row of the window:
        ``where`` is ``up``, ``down``, ``page_up``, ``page_down``, ``first`` or
        ``last``; the screen moves the window if there is more that way."""

        def __init__(self, where: str) -> None:
            super().__init__()
            self.where = where

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.tasks: dict[int, Task] = {}
        self.marked: dict[int, Task] = {}
        self.next_id: int | None = None
        self.rebuilds = 0  # times the rows were rebuilt because a change failed half way
        self._cells: dict[int, dict[str, Text]] = {}
        self._order: list[int] = []
        self._now_ms = 0
        self._layout: list[tuple[str, str, int]] = []  # (key, label, width) shown

    @property
    def marks(self) -> set[int]:
        return set(self.marked)

    def on_mount(self) -> None:
        self.relayout(self.size.width or self.app.size.width)

    def on_resize(self, event: Resize) -> None:
        self.relayout(event.size.width)

    # --- moving past the window's edges --------------------------------------------
    def action_cursor_down(self) -> None:
        if self.row_count and self.cursor_row >= self.row_count - 1:
            self.post_message(self.Edge("down"))
        else:
            super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.cursor_row <= 0:
            self.post_message(self.Edge("up"))
        else:
            super().action_cursor_up()

    def action_page_down(self) -> None:
        if self.row_count and self.cursor_row >= self.row_count - 1:
            self.post_message(self.Edge("page_down"))
        else:
            super().action_page_down()

    def action_page_up(self) -> None:
        if self.cursor_row <= 0:
            self.post_message(self.Edge("page_up"))
        else:
            super().action_page_up()

    def action_jump(self, where: str) -> None:
        """``g``/``G``: the first or last row of everything that matches (the screen
        moves the window there first)."""
        self.post_message(self.Edge(where))

    def jump_within(self, where: str) -> None:
        super().action_jump(where)

    @property
    def column_keys(self) -> list[str]:
        """The keys of the columns shown now, in order."""
        return [key for key, _, _ in self._layout]

    def relayout(self, width: int) -> None:
        """Fit the columns to ``width`` cells; rebuild the table if they change."""
        id_width = max(2, len(str(max(self.tasks, default=0))))
        columns = [replace(c, width=id_width) if c.key == "id" else c for c in COLUMNS]
        layout = fit(columns, width, flex_min=SUBJECT_MIN, flex_max=SUBJECT_MAX, flex_keep=SUBJECT_KEEP)
        if layout == self._layout:
            return
        keep_id, keep_row = self.current_id, self.cursor_row
        self._layout = layout
        self.clear(columns=True)
        for key, label, cells in layout:
            self.add_column(label, key=key, width=cells)
        for task_id in self._order:
            self.add_row(*(self._cells[task_id][key] for key in self.column_keys), key=str(task_id))
        self._restore_cursor(keep_id, keep_row)

    @property
    def current_id(self) -> int | None:
        """The highlighted task's id (None when the table is empty)."""
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        return self._order[self.cursor_row]

    @property
    def current(self) -> Task | None:
        task_id = self.current_id
        return None if task_id is None else self.tasks.get(task_id)

    @property
    def order(self) -> list[int]:
        """Task ids in display order (a copy)."""
        return list(self._order)

    def reconcile(
        self,
        tasks: Sequence[Task],
        now_ms: int,
        next_id: int | None,
        *,
        moved: bool = False,
        select: int | None = None,
    ) -> None:
        """Make the table show ``tasks`` in this order, touching only what changed.

        A task listed twice is shown once (its last version). ``moved``: the window
        moved (another page): marks of tasks outside it stay. ``select``: put the
        cursor on this task if it is there (else the highlighted one stays, or the
        same height). If a change fails half way (the table and the tasks disagree),
        the rows are rebuilt from ``tasks`` instead: the table is never left stale."""
        wanted: dict[int, Task] = {}
        for task in tasks:
            wanted[task.id] = task  # a later version of the same task wins
        order = list(dict.fromkeys(t.id for t in tasks))
        keep_id = select if select is not None and select in wanted else self.current_id
        keep_row = self.cursor_row
        self._now_ms = now_ms
        self.next_id = next_id
        for task_id in list(self.marked):
            if task_id in wanted:
                self.marked[task_id] = wanted[task_id]
            elif not moved:
                del self.marked[task_id]  # it left the list (finished, filtered out)
        try:
            self._change_rows(wanted, order)
        except Exception:
            log.exception("the queue table could not be changed in place; rebuilding it")
            self._rebuild(wanted, order, failed=True)
        self._restore_cursor(keep_id, keep_row)
        if self._layout:
            self.relayout(self.size.width)  # a longer id widens its column

    def _change_rows(self, wanted: dict[int, Task], order: list[int]) -> None:
        leaving = [i for i in self._order if i not in wanted]
        if len(leaving) > BULK_LEAVING:
            # Textual's remove_row renumbers every row: many at once (a fast drain)
            # cost rows² where putting the rows back costs rows.
            self._rebuild(wanted, order, failed=False)
            return
        for gone in leaving:
            if RowKey(str(gone)) in self.rows:
                self.remove_row(str(gone))
            self.tasks.pop(gone, None)
            self._cells.pop(gone, None)
        self._order = [i for i in self._order if i in wanted]
        for task_id in order:
            self._put(wanted[task_id])
        self._order = order
        if len(self.rows) != len(order):
            raise RuntimeError(f"{len(self.rows)} rows for {len(order)} tasks")
        position = {task_id: n for n, task_id in enumerate(order)}
        self.sort("id", key=lambda cell: position[int(cell.plain)])

    def _rebuild(self, wanted: dict[int, Task], order: list[int], *, failed: bool) -> None:
        """Put every row back in order (the caller keeps the cursor on its task);
        ``failed``: because a change in place failed half way (counted)."""
        self.rebuilds += failed
        self.clear()
        self.tasks, self._cells, self._order = {}, {}, []
        for task_id in order:
            self._put(wanted[task_id])
        self._order = order

    def _put(self, task: Task) -> None:
        cells = task_cells(task, self._now_ms, is_next=task.id == self.next_id, marked=task.id in self.marked)
        old = self._cells.get(task.id)
        if old is None or RowKey(str(task.id)) not in self.rows:
            self.add_row(*(cells[key] for key in self.column_keys), key=str(task.id))
        else:
            for key in self.column_keys:
                if not _same(old[key], cells[key]):
                    self.update_cell(str(task.id), key, cells[key])
        self.tasks[task.id] = task
        self._cells[task.id] = cells

    def _restore_cursor(self, keep_id: int | None, keep_row: int) -> None:
        if not self._order:
            self.post_message(self.Highlighted(None))
            return
        if keep_id is not None and keep_id in self.tasks:
            row = self._order.index(keep_id)
        else:  # the highlighted task left the table: stay at the same height
            row = min(keep_row, len(self._order) - 1)
        if row != self.cursor_row:
            self.move_cursor(row=row, animate=False)
        self.post_message(self.Highlighted(self.current))

    def tick(self, now_ms: int) -> None:
        """Re-render the time-relative cell of each row (no query); only cells whose
        text changed repaint. A task that became due keeps its "later" marker until
        the next snapshot (the dispatcher's order changes only with a refresh)."""
        self._now_ms = now_ms
        if "when" not in self.column_keys:
            return
        for task_id in self._order:
            task, cells = self.tasks.get(task_id), self._cells.get(task_id)
            if task is None or cells is None:
                continue
            when = when_cell(task, now_ms)
            if not _same(cells["when"], when):
                cells["when"] = when
                self.update_cell(str(task_id), "when", when)

    def toggle_mark(self, task_id: int) -> None:
        if task_id in self.marked:
            del self.marked[task_id]
        elif task_id in self.tasks:
            self.marked[task_id] = self.tasks[task_id]
        if task_id in self.tasks:
            self._put(self.tasks[task_id])

    def clear_marks(self) -> None:
        marked, self.marked = self.marked, {}
        for task_id in marked.keys() & self.tasks.keys():
            self._put(self.tasks[task_id])

    def select_id(self, task_id: int) -> bool:
        """Move the cursor to ``task_id``; False when it is not in the table."""
        if task_id not in self.tasks:
            return False
        self.move_cursor(row=self._order.index(task_id), animate=False)
        return True

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self.post_message(self.Highlighted(self.current))


def _same(a: Text, b: Text) -> bool:
    """Rich compares text and spans only; a change of base style must repaint too."""
    return a.plain == b.plain and a.style == b.style and a.spans == b.spans
