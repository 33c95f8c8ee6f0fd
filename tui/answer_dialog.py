"""The answer dialog: a person answers the question of a waiting task.

The agent's question is shown above the answer box, with its choices numbered; the
answer is typed, or a choice picked by its number (a bare ``2`` answers with the
second choice). It returns the answer's text, or None when canceled; the caller
writes it (``Store.answer``: a note by the person, the task due at once).
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from tui.live import LiveScreen
from tui.safety import report
from vigil.errors import InputError
from vigil.models import Task


def chosen_answer(text: str, choices: tuple[str, ...]) -> str:
    """What an answer box's ``text`` answers: choice N for a bare number N among
    ``choices`` (1 is the first), else the text itself (stripped)."""
    stripped = text.strip()
    if stripped.isdigit() and 1 <= int(stripped) <= len(choices):
        return choices[int(stripped) - 1]
    return stripped


def question_text(task: Task) -> Text:
    """The question as the dialog shows it: the task, the question, the choices."""
    text = Text(f"#{task.id} {task.subject}\n", style="bold")
    text.append(f"The agent asks: {task.question or '(no question recorded)'}\n")
    for number, choice in enumerate(task.choices, start=1):
        text.append(f"  {number}. {choice}\n", style="cyan")
    return text


class AnswerDialog(ModalScreen[str | None]):
    """Ask a person for the answer to ``task``'s question → the answer, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, task: Task) -> None:
        super().__init__()
        self._asking = task

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(question_text(self._asking), id="question")
            hint = " (or a choice's number)" if self._asking.choices else ""
            yield Label(f"Your answer{hint}: kept as a note; the agent carries on with it")
            yield Input(id="answer")
            yield Static(id="error", classes="error")
            with Horizontal():
                yield Button("Answer (enter)", variant="primary", id="ok")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#answer", Input).focus()

    def action_submit(self) -> None:
        answer = chosen_answer(self.query_one("#answer", Input).value, self._asking.choices)
        if not answer:
            self.query_one("#error", Static).update(Text("an answer is needed"))
            return
        self.dismiss(answer)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#ok")
    def _ok(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.action_cancel()

    @on(Input.Submitted, "#answer")
    def _enter(self) -> None:
        self.action_submit()


def ask_and_answer(screen: LiveScreen[Any], task: Task) -> None:
    """Ask a person for ``task``'s answer, then store it as ``vigil task answer``
    does (one write at a time, ``ctx.writes``), say what came of it and reload
    ``screen``. Nothing raises: a failure is reported on the screen."""

    async def write(answer: str) -> None:
        ctx = screen.ctx
        try:
            async with ctx.writes:
                await ctx.store.answer(task.id, answer, actor=ctx.actor)
        except InputError as err:
            screen.notify(str(err), severity="warning", markup=False)
        except Exception as err:
            report(screen, err, "answering the task")
        else:
            screen.notify(f"#{task.id} answered; due now", markup=False)
        screen.reload()

    def answered(answer: str | None) -> None:
        if answer:
            screen.run_worker(write(answer), group="write", exit_on_error=False)

    screen.app.push_screen(AnswerDialog(task), answered)
