"""Confirmation (with a preview of the tasks it touches) and the help screen."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tui.cells import one_line
from tui.keys import GROUPS, KeyInfo, grouped
from vigil.models import Task

PREVIEW_ROWS = 20


def preview(tasks: Sequence[Task], skipped: Sequence[Task]) -> Text:
    """The tasks an action will touch, one a line, and those it will skip."""
    lines = Text()
    for task in tasks[:PREVIEW_ROWS]:
        lines.append(f"#{task.id} ", style="bold")
        lines.append(f"{task.status} ", style="dim")
        lines.append(one_line(task.subject, 50) + "\n")
    if len(tasks) > PREVIEW_ROWS:
        lines.append(f"… and {len(tasks) - PREVIEW_ROWS} more\n", style="dim")
    if skipped:
        ids = ", ".join(f"#{t.id}" for t in skipped[:PREVIEW_ROWS])
        lines.append(f"skipped (does not apply): {ids}", style="dim")
    return lines


class ConfirmDialog(ModalScreen[bool]):
    """Yes/no. As in every dialog, enter confirms (``y`` too: Yes has the focus)
    and escape declines (``n`` too); tab moves to No, whose enter declines."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: Text, details: Text | None = None) -> None:
        super().__init__()
        self._question = question
        self._details = details

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self._question)
            if self._details is not None:  # the preview of what it touches
                with VerticalScroll():
                    yield Static(self._details)
            with Horizontal():
                yield Button("Yes (enter)", variant="error", id="yes")
                yield Button("No (esc)", id="no")

    def on_mount(self) -> None:
        self.query_one("#yes", Button).focus()

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class HelpScreen(ModalScreen[None]):
    """Every key of the screen below, grouped (Vigil's groups first), each with what
    it does; a key that does not apply to the highlighted row now is dimmed."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q,question_mark", "close", "Close")]

    def __init__(self, keys: Sequence[KeyInfo], labels: Mapping[str, str] | None = None) -> None:
        """``labels`` overrides a key's label by action name (``L``: pause or resume)."""
        super().__init__()
        self._keys = keys
        self._labels = labels or {}

    def compose(self) -> ComposeResult:
        keys = grouped(list(self._keys))
        # One key column width for every group, set by Vigil's keys ("shift+tab" wraps).
        width = max((len(k.shown) for k in keys if k.group != GROUPS[-1]), default=1)
        # Labels line up across groups up to 10 cells; a longer one ("Only completed")
        # widens only its own group.
        label_width = min(10, max((len(self._labels.get(k.name, k.label)) for k in keys), default=1))
        parts: list[RenderableType] = []
        for group in GROUPS:
            members = [k for k in keys if k.group == group]
            if not members:
                continue
            table = Table.grid(padding=(0, 1))
            table.add_column(width=width, justify="right", style="bold")
            table.add_column(min_width=label_width, no_wrap=True, style="bold")
            table.add_column(ratio=1)
            for key in members:
                dim = "" if key.enabled else "dim"
                what = Text(key.help if key.help != key.label else "", style=dim)
                if not key.enabled:
                    what.append(" (not now)" if what else "(not now)", style="dim italic")
                table.add_row(Text(key.shown, style=dim), Text(self._labels.get(key.name, key.label), style=dim), what)
            parts += [Text(("\n" if parts else "") + group, style="bold underline"), table]
        with Vertical():
            yield Static(Text("Keys", style="bold"))
            with VerticalScroll():
                yield Static(Group(*parts))
            yield Static(Text("escape or enter closes this help; ctrl+p searches every action by name", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
