"""The task keys (``+ - d x r a R``) as an object a screen owns: the queue's act on
the marked tasks if any, else on the highlighted one; the task screen's on its
task. Each goes through ``tui.steering``'s conditional writes, after a
confirmation where one is due (a bulk change, a cancel, an approval) and a
preview of which tasks it touches and which it skips.

The screen's ``action_*`` methods call ``TaskActions`` (so a failing one is shown,
as every screen action is); it knows the screen only as a ``LiveScreen`` and the
three callables it is given, never imports it back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text

from tui.cells import one_line
from tui.dialogs import ConfirmDialog, preview
from tui.forms import DeferChoice, DeferForm, ReasonForm
from tui.live import LiveScreen
from tui.safety import report
from tui.steering import Action, applies, apply_many, decision_effect, summarize
from vigil.models import Task, TaskStatus

VERBS = {Action.CANCEL: "Cancel", Action.RAISE: "Raise the priority of", Action.LOWER: "Lower the priority of"}
# Asked before a write to one task (a bulk write always asks): approval lets work run
# that waited for a person; a cancel ends work.
CONFIRM_ONE = frozenset({Action.CANCEL, Action.APPROVE})


class TaskActions:
    """A screen's task actions. ``targets`` gives the tasks a key acts on, ``marked``
    whether rows are marked (a bulk action: always confirmed), ``written`` is called
    after each write (marks cleared, the screen reloaded)."""

    def __init__(
        self,
        screen: LiveScreen[Any],
        targets: Callable[[], list[Task]],
        marked: Callable[[], bool],
        written: Callable[[], None],
    ) -> None:
        self._screen = screen
        self._targets = targets
        self._marked = marked
        self._written = written

    def act(self, action: Action) -> None:
        """Raise, lower, retry, cancel or approve the targets, confirmed where due."""
        bulk = self._marked()
        self._confirm_then_write(action, confirm=bulk or action in CONFIRM_ONE)

    def defer(self) -> None:
        targets, _ = self._split(Action.DEFER)
        if not targets:
            return
        if len(targets) == 1:
            what = Text(f"#{targets[0].id} {one_line(targets[0].subject, 50)}")
        else:
            what = Text(f"{len(targets)} marked tasks")
        due = targets[0].scheduled_for if len(targets) == 1 else None

        def chosen(choice: DeferChoice | None) -> None:
            if choice is not None:
                self._confirm_then_write(Action.DEFER, confirm=len(targets) > 1, choice=choice)

        ctx = self._screen.ctx
        self._screen.app.push_screen(DeferForm(ctx.clock, what, ctx.times, due_ms=due), chosen)

    def reject(self) -> None:
        targets, skipped = self._split(Action.REJECT)
        if not targets:
            return
        label = f"#{targets[0].id}" if len(targets) == 1 else f"{len(targets)} tasks"
        title = Text(f"Reject {label}? {decision_effect(Action.REJECT, targets)}", style="bold")

        def answered(reason: str | None) -> None:
            if reason:
                self._write(Action.REJECT, targets, reason=reason)

        label = "Reason (kept in the task's summary and audit trail)"
        form = ReasonForm(title, label=label, required=True, details=preview(targets, skipped))
        self._screen.app.push_screen(form, answered)

    def _split(self, action: Action) -> tuple[list[Task], list[Task]]:
        targets = self._targets()
        return [t for t in targets if applies(action, t)], [t for t in targets if not applies(action, t)]

    def _confirm_then_write(self, action: Action, *, confirm: bool, choice: DeferChoice | None = None) -> None:
        targets, skipped = self._split(action)
        if not targets:
            return
        if not confirm:
            self._write(action, targets, choice=choice)
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
                self._write(action, targets, choice=choice)

        self._screen.app.push_screen(ConfirmDialog(question, preview(targets, skipped)), answered)

    def _write(
        self, action: Action, targets: Sequence[Task], *, choice: DeferChoice | None = None, reason: str | None = None
    ) -> None:
        work = self._apply_write(action, list(targets), choice, reason)
        self._screen.run_worker(work, group="write", exit_on_error=False)

    async def _apply_write(
        self, action: Action, targets: list[Task], choice: DeferChoice | None, reason: str | None
    ) -> None:
        try:
            reports = await apply_many(self._screen.ctx, action, targets, choice=choice, reason=reason)
        except Exception as err:  # shown, as a screen's own handler's would be: never fatal
            report(self._screen, err, "changing tasks")
            return
        message, ok = summarize(reports)
        self._screen.notify(message, severity="information" if ok else "warning", markup=False)
        self._written()
