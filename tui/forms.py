"""Modal forms: a new task, a defer time. Both validate before they close.

Validation reuses the CLI's rules (``vigil.commands.new_task_from_options``,
``vigil.durations.parse_when_ms``), so the TUI and ``vigil task add`` accept and
refuse exactly the same input; an error is shown in the form, which stays open.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from tui.times import Times, relative
from vigil.clock import Clock
from vigil.commands import new_task_from_options
from vigil.durations import WHEN_FORMS, parse_duration_ms, parse_when_ms
from vigil.errors import InputError
from vigil.models import NewTask


class NewTaskForm(ModalScreen[NewTask | None]):
    """Subject, description, priority, skills, due time, dedup key → a ``NewTask``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Add"),
        Binding("tab", "move(1)", "Next box", show=False, priority=True),
        Binding("shift+tab", "move(-1)", "Previous box", show=False, priority=True),
    ]

    def __init__(self, clock: Clock, skills_dir: Path | None = None) -> None:
        super().__init__()
        self._clock = clock
        self._skills_dir = skills_dir  # the home's skills/: a skill not there is refused

    def action_move(self, step: int) -> None:
        """Tab and shift+tab, as priority bindings: the focus moves as the key
        arrives, so the letters typed after it land in the next box even when they
        come faster than the screen handles keys."""
        if step > 0:
            self.focus_next()
        else:
            self.focus_previous()

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


@dataclass(frozen=True)
class DeferChoice:
    """What the defer dialog asks for: ``by_ms`` later than each task is due now (a
    task already due: than now), or, typed, until ``until_ms``. ``label`` says it
    in words (``by 1 hour``, ``until 2026-12-01 10:00:00 CET``)."""

    label: str
    by_ms: int | None = None
    until_ms: int | None = None


class DeferForm(ModalScreen[DeferChoice | None]):
    """Pick a preset (the first is focused: enter defers by an hour from the task's
    due time) or type a duration from now or an ISO time, parsed as ``vigil task
    defer`` parses it. Enter confirms, escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("left", "focus_previous", "Previous", show=False),
        Binding("right", "focus_next", "Next", show=False),
    ]

    def __init__(self, clock: Clock, what: Text, times: Times, *, due_ms: int | None = None) -> None:
        """``due_ms``: when the one task is due now (None: several tasks)."""
        super().__init__()
        self._clock = clock
        self._what = what
        self._times = times
        self._due_ms = due_ms

    def compose(self) -> ComposeResult:
        now = self._clock.now_ms()
        with Vertical():
            yield Static(Text("Defer ", style="bold") + self._what)
            if self._due_ms is None:
                due = "each later than it is due now (or than now, if it is due already)"
            elif self._due_ms <= now:
                due = "due now: later than now"
            else:
                due = f"due {relative(self._due_ms, now)} ({self._times.at(self._due_ms)}): later than that"
            yield Static(Text(due, style="dim"), classes="hint")
            with Horizontal():
                for value, label in DEFER_PRESETS:
                    yield Button(f"+{label}", id=f"preset-{value}")
            yield Label("or until: a duration from now (90m, 2h, 1d) or a time (2026-12-01T09:00Z), then enter")
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
        self.dismiss(DeferChoice(f"until {self._times.at(until)}", until_ms=until))

    @on(Button.Pressed)
    def _preset(self, event: Button.Pressed) -> None:
        if event.button.id and event.button.id.startswith("preset-"):
            value = event.button.id.removeprefix("preset-")
            label = dict(DEFER_PRESETS)[value]
            self.dismiss(DeferChoice(f"by {label}", by_ms=parse_duration_ms(value)))

    @on(Input.Submitted, "#when")
    def _typed(self, event: Input.Submitted) -> None:
        self._submit(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


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
