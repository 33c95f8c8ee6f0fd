"""The queue's task keys (``+ - d x r a R``): on the marked tasks if any, else on the
highlighted one, through ``tui.steering``'s conditional writes, after a
confirmation where one is due (a bulk change, a cancel, an approval) and a
preview of which tasks it touches and which it skips.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.dom import DOMNode

from tui.cells import one_line
from tui.dialogs import ConfirmDialog, preview
from tui.forms import DeferChoice, DeferForm, ReasonForm
from tui.safety import guard_handlers, guarded
from tui.steering import Action, applies, apply_many, decision_effect, summarize
from vigil.models import Task, TaskStatus

if TYPE_CHECKING:
    from tui.queue_screen import QueueScreen

VERBS = {Action.CANCEL: "Cancel", Action.RAISE: "Raise the priority of", Action.LOWER: "Lower the priority of"}


class QueueSteering:
    """Mixed into ``QueueScreen``: its task actions."""

    def action_raise(self) -> None:
        _run_on_targets(_screen(self), Action.RAISE, confirm_bulk=True)

    def action_lower(self) -> None:
        _run_on_targets(_screen(self), Action.LOWER, confirm_bulk=True)

    def action_retry(self) -> None:
        _run_on_targets(_screen(self), Action.RETRY, confirm_bulk=True)

    def action_cancel(self) -> None:
        _run_on_targets(_screen(self), Action.CANCEL, confirm_bulk=True, confirm_one=True)

    def action_approve(self) -> None:
        # Confirmed even for one task: approval lets work run that waited for a person.
        _run_on_targets(_screen(self), Action.APPROVE, confirm_bulk=True, confirm_one=True)

    def action_defer(self) -> None:
        screen = _screen(self)
        targets, _ = _split(screen, Action.DEFER)
        if not targets:
            return
        if len(targets) == 1:
            what = Text(f"#{targets[0].id} {one_line(targets[0].subject, 50)}")
        else:
            what = Text(f"{len(targets)} marked tasks")
        due = targets[0].scheduled_for if len(targets) == 1 else None

        def chosen(choice: DeferChoice | None) -> None:
            if choice is not None:
                _confirm_then_write(screen, Action.DEFER, confirm=len(targets) > 1, choice=choice)

        screen.app.push_screen(DeferForm(screen.ctx.clock, what, screen.ctx.times, due_ms=due), chosen)

    def action_reject(self) -> None:
        screen = _screen(self)
        targets, skipped = _split(screen, Action.REJECT)
        if not targets:
            return
        label = f"#{targets[0].id}" if len(targets) == 1 else f"{len(targets)} tasks"
        title = Text(f"Reject {label}? {decision_effect(Action.REJECT, targets)}", style="bold")

        def answered(reason: str | None) -> None:
            if reason:
                _write(screen, Action.REJECT, targets, reason=reason)

        form = ReasonForm(
            title,
            label="Reason (kept in the task's summary and audit trail)",
            required=True,
            details=preview(targets, skipped),
        )
        screen.app.push_screen(form, answered)


def _screen(mixin: QueueSteering) -> QueueScreen:
    from tui.queue_screen import QueueScreen

    assert isinstance(mixin, QueueScreen)
    return mixin


def _split(screen: QueueScreen, action: Action) -> tuple[list[Task], list[Task]]:
    targets = screen.targets()
    return [t for t in targets if applies(action, t)], [t for t in targets if not applies(action, t)]


def _run_on_targets(screen: QueueScreen, action: Action, *, confirm_bulk: bool, confirm_one: bool = False) -> None:
    bulk = bool(screen.table.marks)
    _confirm_then_write(screen, action, confirm=(bulk and confirm_bulk) or (not bulk and confirm_one))


def _confirm_then_write(
    screen: QueueScreen, action: Action, *, confirm: bool, choice: DeferChoice | None = None
) -> None:
    targets, skipped = _split(screen, action)
    if not targets:
        return
    if not confirm:
        _write(screen, action, targets, choice=choice)
        return
    words = VERBS.get(action, str(action).capitalize())
    label = f"#{targets[0].id}" if len(targets) == 1 else f"{len(targets)} tasks"
    question = Text(f"{words} {label}?", style="bold")
    if action is Action.DEFER and choice is not None:
        question = Text(f"Defer {label} {choice.label}?", style="bold")
    if action is Action.CANCEL and any(t.status is TaskStatus.ACTIVE for t in targets):
        question.append("\nA running task gets a cancel request; the dispatcher stops it.", style="yellow")
    if action is Action.APPROVE:
        question.append(f"\n{decision_effect(Action.APPROVE, targets)}", style="yellow")

    def answered(yes: bool | None) -> None:
        if yes:
            _write(screen, action, targets, choice=choice)

    screen.app.push_screen(ConfirmDialog(question, preview(targets, skipped)), answered)


def _write(
    screen: QueueScreen,
    action: Action,
    targets: Sequence[Task],
    *,
    choice: DeferChoice | None = None,
    reason: str | None = None,
) -> None:
    screen.run_worker(_apply_write(screen, action, list(targets), choice, reason), group="write", exit_on_error=False)


@guarded("changing tasks")
async def _apply_write(
    screen: QueueScreen, action: Action, targets: list[Task], choice: DeferChoice | None, reason: str | None
) -> None:
    reports = await apply_many(screen.ctx, action, targets, choice=choice, reason=reason)
    message, ok = summarize(reports)
    screen.notify(message, severity="information" if ok else "warning", markup=False)
    if screen.table.marks:
        screen.table.clear_marks()
        screen.show_badges()
    screen.reload()


# A failing key must not end the app (as LiveScreen does for a screen's own actions).
guard_handlers(cast("type[DOMNode]", QueueSteering), ("action_",))
