"""Column widths that fit a table to the width it has.

Every column has a fixed width but one, the subject, which takes what is left
(between ``flex_min`` and ``flex_max`` cells; its text is cut with an ellipsis).
Optional columns, at the end, are shown only while the subject keeps
``flex_keep``; the others are always shown, so status and source never leave the
screen (under 80 columns the subject gives up its minimum first, and what still
does not fit is cut at the edge: the tables hide their horizontal scrollbar). A
table rebuilt with new widths on resize never grows past its width
and shrinks again when the terminal does (Textual's automatic widths only grow).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PAD = 2  # DataTable's cell padding: one cell on each side of every column
SCROLLBAR = 2  # the vertical scrollbar, when the rows overflow
FLEX_FLOOR = 4  # the flexible column's width when even its minimum does not fit


@dataclass(frozen=True)
class Column:
    """``width`` in cells (0: the flexible column); ``optional``: dropped first."""

    key: str
    label: str
    width: int
    optional: bool = False


def fit(
    columns: Sequence[Column], available: int, *, flex_min: int, flex_max: int, flex_keep: int
) -> list[tuple[str, str, int]]:
    """(key, label, width) of the columns to show in ``available`` cells, in order."""
    fixed = sum(c.width + PAD for c in columns if c.width and not c.optional)
    flex = available - SCROLLBAR - fixed - PAD
    shown: set[str] = set()
    for column in columns:
        if column.optional:
            if flex - (column.width + PAD) < flex_keep:
                break
            flex -= column.width + PAD
            shown.add(column.key)
    # Below its minimum only when nothing else fits (a terminal under 80 columns):
    # the table never grows past its width, so no horizontal scrollbar appears.
    flex = max(min(flex_min, max(FLEX_FLOOR, flex)), min(flex, flex_max))
    return [(c.key, c.label, c.width or flex) for c in columns if not c.optional or c.key in shown]


def needed(columns: Sequence[Column], flex: int) -> int:
    """The width the table needs to show its required columns with a ``flex``-wide
    flexible column."""
    return SCROLLBAR + sum((c.width or flex) + PAD for c in columns if not c.optional)
