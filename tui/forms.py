"""Modal forms: a new task, a defer time. Both validate before they close.

Validation reuses the CLI's rules (``vigil.commands.new_task_from_options``,
``vigil.durations.parse_when_ms``), so the TUI and ``vigil task add`` accept and
refuse exactly the same input; an error is shown in the form, which stays open.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from vigil.clock import Clock, iso_utc
from vigil.commands import new_task_from_options
from vigil.durations import WHEN_FORMS, parse_when_ms
from vigil.errors import InputError
from vigil.models import NewTask


class NewTaskForm(ModalScreen[NewTask | None]):
    """Subject, description, priority, skills, due time, dedup key → a ``NewTask``."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "submit", "Add")]

    def __init__(self, clock: Clock, skills_dir: Path | None = None) -> None:
        super().__init__()
        self._clock = clock
        self._skills_dir = skills_dir  # the home's skills/: a skill not there is refused

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("New task", style="bold"))
            yield Label("Subject")
            yield Input(id="subject", placeholder="what should the agent do?")
            yield Label("Description")
            yield Input(id="description", placeholder="optional details")
            yield Label("Priority (1 most urgent … 9)")
            yield Input("5", id="priority")
            yield Label("Skills (comma-separated)")
            yield Input(id="skills")
            yield Label("Due (empty: now; a duration 30m, 2h, 1d, or a time 2026-12-01T09:00Z)")
            yield Input(id="due")
            yield Label("Dedup key (optional: no second open task with this key)")
            yield Input(id="key")
            yield Static(id="error", classes="error")
            yield Static(Text("enter or ctrl+s adds · esc cancels · tab moves"), classes="hint")
            with Horizontal():
                yield Button("Add", variant="primary", id="add")
                yield Button("Cancel", id="cancel")

    def _value(self, name: str) -> str:
        return self.query_one(f"#{name}", Input).value

    def build(self) -> NewTask:
        """The task the form describes; raises ``InputError``."""
        due = self._value("due").strip()
        key = self._value("key").strip()
        options = {
            "description": self._value("description"),
            "priority": self._value("priority").strip() or "5",
            "skills": self._value("skills"),
            "at": due or None,
            "source_key": key or None,
            "source": "human",
        }
        # "at" takes a duration or a time: the same words `vigil task add --at` takes.
        return new_task_from_options(self._value("subject"), options, self._clock.now_ms(), self._skills_dir)

    def action_submit(self) -> None:
        try:
            new = self.build()
        except InputError as err:
            self.query_one("#error", Static).update(Text(str(err)))
            return
        self.dismiss(new)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#add")
    def _add(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.action_cancel()

    @on(Input.Submitted)
    def _enter(self) -> None:
        self.action_submit()


DEFER_PRESETS = (("1h", "1 hour"), ("4h", "4 hours"), ("1d", "1 day"), ("1w", "1 week"))


class DeferForm(ModalScreen[int | None]):
    """Pick a preset (the first is focused) or type a duration / ISO time → epoch
    ms, parsed as ``vigil task defer`` parses it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("left", "focus_previous", "Previous", show=False),
        Binding("right", "focus_next", "Next", show=False),
    ]

    def __init__(self, clock: Clock, what: Text) -> None:
        super().__init__()
        self._clock = clock
        self._what = what

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("Defer ", style="bold") + self._what)
            with Horizontal():
                for value, label in DEFER_PRESETS:
                    yield Button(label, id=f"preset-{value}")
            yield Label("or until: a duration (90m, 2h, 1d) or a time (2026-12-01T09:00Z), then enter")
            yield Input(id="when")
            yield Static(id="error", classes="error")
            yield Static(Text("← → or tab choose · enter defers · esc cancels"), classes="hint")

    def on_mount(self) -> None:
        self.query_one(f"#preset-{DEFER_PRESETS[0][0]}", Button).focus()  # enter defers by an hour

    def action_focus_previous(self) -> None:
        self.focus_previous()

    def action_focus_next(self) -> None:
        self.focus_next()

    def _submit(self, text: str) -> None:
        if not text.strip():
            error = f"type {WHEN_FORMS}, or pick a preset"
            self.query_one("#error", Static).update(Text(error))
            return
        try:
            until = parse_when_ms(text, self._clock.now_ms())
        except InputError as err:
            self.query_one("#error", Static).update(Text(str(err)))
            return
        self.dismiss(until)

    @on(Button.Pressed)
    def _preset(self, event: Button.Pressed) -> None:
        if event.button.id and event.button.id.startswith("preset-"):
            self._submit(event.button.id.removeprefix("preset-"))

    @on(Input.Submitted, "#when")
    def _typed(self, event: Input.Submitted) -> None:
        self._submit(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


def defer_preview(until_ms: int) -> str:
    return f"until {iso_utc(until_ms)}"


class ReasonForm(ModalScreen[str | None]):
    """Ask for a reason (a rejection, a pause) → the text, or None when canceled.

    ``required``: an empty reason is refused in the form, which stays open (the
    store refuses an empty rejection reason too). ``details`` is the preview of
    the tasks it touches."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: Text, *, label: str, required: bool, details: Text | None = None) -> None:
        super().__init__()
        self._title = title
        self._label = label
        self._required = required
        self._details = details

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self._title)
            if self._details is not None:
                yield Static(self._details)
            yield Label(self._label)
            yield Input(id="reason")
            yield Static(id="error", classes="error")
            with Horizontal():
                yield Button("OK (enter)", variant="primary", id="ok")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#reason", Input).focus()

    def action_submit(self) -> None:
        reason = self.query_one("#reason", Input).value.strip()
        if self._required and not reason:
            self.query_one("#error", Static).update(Text("a reason is needed"))
            return
        self.dismiss(reason)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#ok")
    def _ok(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.action_cancel()

    @on(Input.Submitted, "#reason")
    def _enter(self) -> None:
        self.action_submit()
