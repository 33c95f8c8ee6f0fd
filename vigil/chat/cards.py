"""What the bot sends: a card per moment a person is needed, as plain text (no
markup: nothing the agent wrote can format or hide anything) and rows of buttons.

Every card ends with a reference line, ``<home> · task #12 · ref 345``: ``ref`` is
the audit row (``task_events.id``) of the moment the card is about (the gate's
``since`` for a gate card). A button carries the same ``ref`` in its callback data
(``action:task:ref[:arg]``, at most 64 bytes as Telegram allows) and a reply is read
against the reference line of the message it answers, so an action on a card
whose task has moved on since is recognised and refused (``vigil.chat.actions``);
the bot keeps no table of the messages it sent.

Text from the agent goes through ``vigil.printable`` (control characters shown
escaped) and is cut at ``MAX_TEXT`` characters with a **More** button.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from vigil.gate import LoopGate
from vigil.models import Run, Task
from vigil.printable import printable

MAX_TEXT = 3000  # characters of a card's body; Telegram takes 4096 per message
PAGE = 3500  # characters of one page of a diff or of "More"
CHOICE_LABEL = 40  # characters of a choice shown on its button
_REF = re.compile(r"task #(\d+) · ref (\d+)\s*\Z")


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    data: str  # callback data: "action:task:ref[:arg]"


Row = tuple[Button, ...]


@dataclass(frozen=True, slots=True)
class Card:
    """One message: ``text`` and rows of buttons (empty: none). ``force_reply``:
    Telegram opens a reply to it on the person's phone (the reason for a reject)."""

    text: str
    buttons: tuple[tuple[Button, ...], ...] = ()
    force_reply: bool = False


@dataclass(frozen=True, slots=True)
class Press:
    """A button's callback data, read back."""

    action: str
    task_id: int
    ref: int
    arg: int | None = None


def press_data(action: str, task_id: int, ref: int, arg: int | None = None) -> str:
    return f"{action}:{task_id}:{ref}" + ("" if arg is None else f":{arg}")


def read_press(data: str) -> Press | None:
    """The callback data of one of our buttons, or None for anything else."""
    parts = data.split(":")
    if len(parts) not in (3, 4) or not all(p.isascii() and p.isdigit() and len(p) <= 19 for p in parts[1:]):
        return None
    return Press(parts[0], int(parts[1]), int(parts[2]), int(parts[3]) if len(parts) == 4 else None)


def reference(home: str, task_id: int, ref: int) -> str:
    return f"{home} · task #{task_id} · ref {ref}"


def read_reference(text: str) -> tuple[int, int] | None:
    """(task id, ref) from the reference line that ends a card, or None."""
    match = _REF.search(text)
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def _cut(text: str, limit: int = MAX_TEXT) -> tuple[str, bool]:
    """``text`` made printable and cut to ``limit`` characters; whether it was cut."""
    shown = printable(text)
    if len(shown) <= limit:
        return shown, False
    return shown[: limit - 1] + "…", True


def _card(lines: Sequence[str], home: str, task: Task, ref: int, rows: list[Row]) -> Card:
    body, cut = _cut("\n".join(lines))
    if cut:
        rows.append((Button("More", press_data("more", task.id, ref)),))
    return Card(f"{body}\n\n{reference(home, task.id, ref)}", tuple(rows))


def _title(task: Task) -> str:
    return f"Task #{task.id}: {printable(task.subject, keep_newlines=False)}"


def question_card(home: str, task: Task, ref: int) -> Card:
    """The agent's question, its choices as buttons; a reply to it is the answer."""
    lines = [_title(task), "", f"The agent asks: {task.question or ''}"]
    rows: list[Row] = [
        (Button(_cut(choice, CHOICE_LABEL)[0], press_data("choice", task.id, ref, n)),)
        for n, choice in enumerate(task.choices, start=1)
    ]
    lines += ["", "Reply to this message to answer" + (", or choose:" if task.choices else ".")]
    return _card(lines, home, task, ref, rows)


def review_card(home: str, task: Task, run: Run | None, flagged: Sequence[str], ref: int) -> Card:
    """A result awaiting review: summary, checks, diff stat, flagged files."""
    lines = [_title(task), "", "Awaiting your review.", f"Summary: {task.result_summary or '(none)'}"]
    if run is not None and run.checks:
        lines.append("Checks: " + "; ".join(f"{check.label} {check.how()}" for check in run.checks))
    if run is not None and run.changes is not None:
        lines.append(f"Changes: {run.changes.stat()} on {run.changes.branch}")
    if flagged:
        lines.append("Flagged files: " + ", ".join(flagged))
    rows: list[Row] = [
        (
            Button("Approve", press_data("approve", task.id, ref)),
            Button("Reject…", press_data("reject", task.id, ref)),
        ),
    ]
    if task.worktree is not None:
        rows.append((Button("Diff", press_data("diff", task.id, ref, 0)),))
    return _card(lines, home, task, ref, rows)


def approval_card(home: str, task: Task, ref: int) -> Card:
    """A task that waits for a person's approval before it may run."""
    lines = [_title(task), "", "Awaiting your approval to run."]
    if task.description:
        lines += ["", task.description]
    rows: list[Row] = [
        (
            Button("Approve", press_data("approve", task.id, ref)),
            Button("Reject…", press_data("reject", task.id, ref)),
        )
    ]
    return _card(lines, home, task, ref, rows)


def failed_card(home: str, task: Task, run: Run | None, ref: int) -> Card:
    """A task that failed for good."""
    lines = [_title(task), "", f"Failed for good after {task.attempt_count} attempt(s)."]
    why = task.result_summary or (run.error if run is not None else None)
    if why:
        lines.append(f"Last: {why}")
    rows: list[Row] = [
        (
            Button("Retry", press_data("retry", task.id, ref)),
            Button("Cancel", press_data("cancel", task.id, ref)),
        )
    ]
    return _card(lines, home, task, ref, rows)


def gate_card(home: str, gate: LoopGate) -> Card:
    """The loop paused or gated; ``Resume`` lets it claim again."""
    what = "paused" if gate.state == "paused" else "gated"
    lines = [f"The loop is {what}: {printable(gate.reason, keep_newlines=False)}"]
    if gate.by:
        lines.append(f"By: {gate.by}")
    if gate.until is not None:
        lines.append("It resumes by itself when the gate's time is up.")
    text = "\n".join(lines) + f"\n\n{home} · gate · since {gate.since}"
    return Card(text, ((Button("Resume", press_data("resume", 0, gate.since)),),))


def confirm_card(text: str, yes: Button) -> Card:
    """A question before a destructive action: ``yes`` or No."""
    return Card(text, ((yes, Button("No", "no:0:0")),))


def reason_prompt(home: str, task_id: int, ref: int) -> Card:
    """Asks for the reason of a reject, as a reply (Telegram opens it)."""
    text = f"Why reject task #{task_id}? Reply to this message with the reason.\n\n{reference(home, task_id, ref)}"
    return Card(text, force_reply=True)


def pages(text: str, size: int = PAGE) -> list[str]:
    """``text`` made printable, in pages of at most ``size`` characters, cut at line
    ends where a line fits."""
    shown = printable(text)
    out: list[str] = []
    page = ""
    for whole in shown.splitlines(keepends=True):
        line = whole
        while len(line) > size:
            if page:
                out.append(page)
                page = ""
            out.append(line[:size])
            line = line[size:]
        if len(page) + len(line) > size:
            out.append(page)
            page = ""
        page += line
    if page or not out:
        out.append(page)
    return out
