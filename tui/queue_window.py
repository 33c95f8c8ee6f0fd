"""Moving the queue's window over everything that matches.

The queue table holds ``WINDOW_ROWS`` rows of the store's answer. A cursor that
goes past the window's last or first row moves the window by ``STEP`` (half of
it), so the highlighted task stays in view and the cursor lands on the row the
key meant; ``G`` and ``g`` move it to the last or first rows of every match.
"""

from __future__ import annotations

from tui.loaders import WINDOW_ROWS
from tui.queue_table import QueueTable
from vigil.task_query import TaskWindow

STEP = WINDOW_ROWS // 2
Landing = tuple[str, int | None]  # where the cursor goes after the move, and from which task


def past_edge(window: TaskWindow, where: str, current: int | None) -> tuple[int, Landing] | None:
    """Where the window starts after the cursor went past ``where`` (``up``,
    ``down``, ``page_up``, ``page_down``, ``first``, ``last``) and where the cursor
    lands then; None when the window already holds that end (nothing to load).
    A start past the end is fine: the store shows the last page."""
    if where == "first":
        return (0, ("first", None)) if window.offset else None
    if where == "last":
        return (window.total, ("last", None)) if window.after else None
    if where in ("down", "page_down") and window.after:
        return window.offset + STEP, ("after" if where == "down" else where, current)
    if where in ("up", "page_up") and window.offset:
        return max(0, window.offset - STEP), ("before" if where == "up" else where, current)
    return None


def land(table: QueueTable, landing: Landing) -> None:
    """After the window moved: put the cursor where the keypress meant it to go."""
    where, anchor = landing
    if where in ("first", "last"):
        table.jump_within(where)
    elif anchor is not None and table.select_id(anchor):
        moves = {
            "after": table.action_cursor_down,
            "before": table.action_cursor_up,
            "page_down": table.action_page_down,
            "page_up": table.action_page_up,
        }
        if where in moves:
            moves[where]()
