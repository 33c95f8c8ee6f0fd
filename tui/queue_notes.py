"""The lines around the queue table: the header's badges (frozen, marked rows),
the note under the filter bar (which rows of how many, filter, sort, a filter
that does not parse) and what an empty queue says to do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from tui.filters import TaskFilter
from tui.loaders import QueueSnapshot
from tui.ordering import SortBy, sort_words


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


def window_note(snapshot: QueueSnapshot | None, flt: TaskFilter, error: str, sort_by: SortBy | None) -> Text:
    """Under the filter bar: which rows of how many are shown (when not all of
    them), the sort, the filter; ``error``: why the text being typed does not parse
    ("" = it does)."""
    note = Text()
    if snapshot is not None:
        window = snapshot.window
        if window.offset or window.after:
            first, last = window.offset + 1, window.offset + len(window.tasks)
            note.append(f"rows {first:,}–{last:,} of {window.total:,}", style="yellow")
            ways = (["↓ past the last row, G: the rest"] if window.after else []) + (
                ["↑ past the first, g: the start"] if window.offset else []
            )
            note.append(f" ({'; '.join(ways)})", style="dim")
    if error:
        note.append(f"  {error}", style="red")
    if sort_by is not None:
        note.append(f"  {sort_words(sort_by)} (s: next; dispatch order after cost)", style="dim")
    if not flt.is_empty and snapshot is not None:
        count = snapshot.window.total
        note.append(
            f"  filter: {flt.text}  ({count:,} {'match' if count == 1 else 'matches'}, esc clears)", style="dim"
        )
    return note


def empty_text(recent: bool, inbox: str | None, *, readonly: bool = False) -> Text:
    """What to do when nothing is open; ``recent``: finished rows are shown dimmed;
    ``readonly``: this TUI cannot add tasks (say how it is done elsewhere)."""
    text = Text("Nothing is open.", style="bold")
    if recent:
        text.append(" The dimmed rows finished in the last few minutes.")
    text.append("\nvigil task add adds a task" if readonly else "\nPress n to add a task")
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
