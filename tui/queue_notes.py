"""The lines around the queue table: the header's badges (frozen, marked rows),
the note under the filter bar (row limit, filter, sort, a filter that does not
parse) and what an empty queue says to do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from tui.filters import TaskFilter
from tui.loaders import LIVE_LIMIT, QueueSnapshot
from tui.ordering import SortBy


def badges_text(waiting: int | None, marked: int) -> Text:
    """``waiting``: changes counted while frozen (None: not frozen)."""
    badge = Text()
    if waiting is not None:
        badge.append(" FROZEN ", style="bold black on cyan")
        badge.append(f" {waiting} {'change' if waiting == 1 else 'changes'} waiting (p)", style="cyan")
    if marked:
        badge.append("  " if badge else "")
        badge.append(f" {marked} marked ", style="bold black on magenta")
        badge.append(" (esc clears)", style="magenta")
    return badge


def filter_note(snapshot: QueueSnapshot | None, flt: TaskFilter, error: str, sort_by: SortBy | None) -> Text:
    """``error``: why the text being typed does not parse ("" = it does)."""
    note = Text()
    if snapshot is not None and snapshot.limited:
        note.append(f"showing the first {LIVE_LIMIT} rows; narrow with / to see others", style="yellow")
    if error:
        note.append(f"  {error}", style="red")
    if sort_by is not None:
        column, descending = sort_by
        order = "descending" if descending else "ascending"
        note.append(f"  sorted by {column}, {order} (s: next; dispatch order after cost)", style="dim")
    if not flt.is_empty and snapshot is not None:
        note.append(f"  filter: {flt.text}  ({len(snapshot.tasks)} shown, esc clears)", style="dim")
    return note


def empty_text(recent: bool, inbox: str | None) -> Text:
    """What to do when nothing is open; ``recent``: finished rows are shown dimmed."""
    text = Text("Nothing is open.", style="bold")
    if recent:
        text.append(" The dimmed rows finished in the last few minutes.")
    text.append("\nPress n to add a task")
    if inbox:
        text.append(f", or drop a text file in {inbox}/")
    text.append(". `vigil run` (or `vigil tui --with-loop`) works through the queue;")
    text.append(" 3 shows everything that finished.")
    return text


def inbox_folder(sensors: Sequence[Mapping[str, Any]]) -> str | None:
    """The folder of the home's inbox sensor, if it has one (from vigil.toml)."""
    for entry in sensors:
        if entry.get("use") == "inbox":
            return str(entry.get("path", "inbox"))
    return None
