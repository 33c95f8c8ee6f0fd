"""Confirmation (with a preview of the tasks it touches) and the help screen."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tui.cells import one_line
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
    """Yes/no; ``y``/enter confirms, ``n``/escape declines."""

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
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class HelpScreen(ModalScreen[None]):
    """Every key of the screen below, with what it does."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, rows: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self._rows = rows

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        for key, text in self._rows:
            table.add_row(Text(key), Text(text))
        with Vertical():
            yield Static(Text("Keys", style="bold"))
            with VerticalScroll():
                yield Static(table)
            yield Static(Text("escape closes this help; ctrl+p searches every action", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
