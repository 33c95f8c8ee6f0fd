"""The Needs you screen (key 6; the first screen at 60 columns or fewer, a phone's
browser): the tasks waiting for a person, most urgent first, each with the actions
that apply to it as buttons, so that a finger does everything a key would.

Most urgent first means: an agent waiting for an answer (its run is parked until
someone answers), then results awaiting review, then tasks awaiting approval to
run, then tasks that failed for good in the last ``FAILED_WITHIN_MS``; by priority
and age inside each. Each card says what waits (the question and its choices, the
result's summary, the error) and offers: Answer, Approve, Reject (with a reason),
Retry, Diff (a task with a branch is reviewed and merged there) and Open (the task
screen). Every write is the one the task screen makes (``tui.steering``), audited
as the app's actor. Text wraps at the screen's width: nothing scrolls sideways.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import HorizontalGroup, VerticalGroup, VerticalScroll
from textual.widgets import Button, Static

from tui.answer_dialog import ask_and_answer
from tui.cells import one_line
from tui.context import Context
from tui.dialogs import ConfirmDialog, preview
from tui.forms import ReasonForm
from tui.keybar import KeyBar
from tui.live import Banner, LiveScreen
from tui.safety import guarded
from tui.steering import Action, apply, awaits_a_decision, decision_effect
from tui.tabs import LoopLine
from tui.times import relative
from vigil.models import Task, TaskStatus
from vigil.printable import printable_values

NARROW_COLUMNS = 60  # at this width or less (a phone's browser), the app opens on this screen
OPEN_LIMIT = 200  # waiting and blocked tasks read per refresh (the newest first)
FAILED_LIMIT = 20
FAILED_WITHIN_MS = 7 * 24 * 3_600_000
TEXT_LIMIT = 600  # characters of a question, summary or error shown on a card

KIND_ORDER = ("waiting", "review", "approval", "failed")
KIND_WORDS = {
    "waiting": "asks you",
    "review": "awaits review",
    "approval": "awaits approval",
    "failed": "failed",
}


def kind_of(task: Task) -> str | None:
    """Why ``task`` needs a person (one of ``KIND_ORDER``), or None."""
    if task.status is TaskStatus.WAITING:
        return "waiting"
    if task.awaiting_review:
        return "review"
    if task.awaiting_approval:
        return "approval"
    if task.status is TaskStatus.FAILED:
        return "failed"
    return None


def needing(tasks: list[Task], now_ms: int) -> list[Task]:
    """The tasks that need a person, most urgent first (failed ones only when recent)."""
    kept = []
    for task in tasks:
        kind = kind_of(task)
        if kind is None:
            continue
        if kind == "failed" and (task.completed_at or 0) < now_ms - FAILED_WITHIN_MS:
            continue
        kept.append(task)
    return sorted(kept, key=lambda t: (KIND_ORDER.index(kind_of(t) or "failed"), t.priority, t.id))


def actions_for(task: Task, readonly: bool) -> tuple[str, ...]:
    """The buttons of ``task``'s card, by name; read-only: only the views."""
    kind = kind_of(task)
    writes: tuple[str, ...] = ()
    if kind == "waiting":
        writes = ("answer",)
    elif kind in ("review", "approval") and awaits_a_decision(task):
        writes = ("approve", "reject")
    elif kind == "failed":
        writes = ("retry",)
    views = ("diff", "open") if task.worktree is not None else ("open",)
    return views if readonly else (*writes, *views)


BUTTON_LABELS = {
    "answer": "Answer",
    "approve": "Approve",
    "reject": "Reject",
    "retry": "Retry",
    "diff": "Diff",
    "open": "Open",
}


def card_text(task: Task, now_ms: int) -> Text:
    """What waits, in words that wrap: the task, then its question, summary or error."""
    kind = kind_of(task) or ""
    text = Text()
    text.append(f"#{task.id} ", style="bold")
    text.append(KIND_WORDS.get(kind, kind), style="bold yellow" if kind != "failed" else "bold red")
    text.append(f"  p{task.priority}  {relative(task.updated_at, now_ms)}\n", style="dim")
    text.append(one_line(task.subject, 200) + "\n", style="bold")
    if kind == "waiting":
        text.append(f"Q: {one_line(task.question or '(no question recorded)', TEXT_LIMIT)}\n")
        for number, choice in enumerate(task.choices, start=1):
            text.append(f"  {number}. {one_line(choice, 120)}\n", style="cyan")
    elif kind == "review":
        summary = task.result_summary or "(no summary)"
        text.append(one_line(summary, TEXT_LIMIT) + "\n")
        if task.worktree is not None:
            text.append("Its branch is reviewed and merged in Diff.\n", style="dim")
    elif kind == "approval":
        text.append(one_line(task.description or "(no description)", TEXT_LIMIT) + "\n", style="dim")
    elif kind == "failed":
        text.append(one_line(task.result_summary or "(no error recorded)", TEXT_LIMIT) + "\n", style="red")
    text.rstrip()
    return text


class TaskCard(VerticalGroup):
    """One task that needs a person: what waits, then a button per action."""

    DEFAULT_CSS = """
    TaskCard { padding: 0 1; margin-bottom: 1; border-left: thick $warning; }
    TaskCard.-failed { border-left: thick $error; }
    TaskCard HorizontalGroup { height: auto; }
    TaskCard Button { min-width: 6; width: auto; height: 3; margin: 0 1 0 0; border: none; padding: 0 1; }
    """

    def __init__(self, task: Task, text: Text, actions: tuple[str, ...]) -> None:
        super().__init__(id=f"card-{task.id}", classes="-failed" if task.status is TaskStatus.FAILED else "")
        self.task_shown = task
        self._text = text
        self._actions = actions

    def compose(self) -> ComposeResult:
        yield Static(self._text, classes="card-text")
        with HorizontalGroup():
            for name in self._actions:
                main = name in ("answer", "approve", "retry")
                yield Button(
                    BUTTON_LABELS[name],
                    id=f"{name}-{self.task_shown.id}",
                    name=name,
                    variant="primary" if main else "default",
                )


@dataclass(frozen=True)
class NeedsYou:
    """What the screen shows: the tasks, most urgent first, and the clock's now."""

    tasks: tuple[Task, ...]
    now_ms: int


class NeedsYouScreen(LiveScreen[NeedsYou]):
    TITLE = "Needs you"
    DEFAULT_CSS = """
    NeedsYouScreen #needs-title { height: auto; padding: 0 1; background: $boost; }
    NeedsYouScreen #needs-list { height: 1fr; overflow-x: hidden; }
    NeedsYouScreen #needs-empty { padding: 1 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.show('queue')", "Queue", tooltip="back to the queue"),
    ]

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx, name="needs")
        self.tasks: tuple[Task, ...] = ()
        self._shown: list[tuple[int, Text, tuple[str, ...]]] | None = None

    def compose(self) -> ComposeResult:
        yield Banner()
        yield Static(Text("Needs you", style="bold"), id="needs-title")
        yield LoopLine(self.ctx)
        yield VerticalScroll(id="needs-list")
        yield KeyBar(self.ctx)

    async def load(self) -> NeedsYou:
        store = self.ctx.store
        now = self.ctx.clock.now_ms()
        open_ones = await store.list_tasks(statuses=(TaskStatus.WAITING, TaskStatus.BLOCKED), limit=OPEN_LIMIT)
        failed = await store.list_tasks(statuses=(TaskStatus.FAILED,), limit=FAILED_LIMIT)
        return NeedsYou(tuple(printable_values(needing([*open_ones, *failed], now))), now)

    def apply(self, data: NeedsYou) -> None:
        self.tasks = data.tasks
        count = len(data.tasks)
        title = Text("Needs you", style="bold")
        title.append(f"  {count} task{'' if count == 1 else 's'}" if count else "  nothing waits", style="dim")
        self.query_one("#needs-title", Static).update(title)
        shown = [(t.id, card_text(t, data.now_ms), actions_for(t, self.ctx.readonly)) for t in data.tasks]
        if shown == self._shown:
            return  # the same cards: leave focus and scrolling alone
        self._shown = shown
        self.run_worker(self._show_cards(data.tasks, shown), group="needs-cards", exclusive=True)

    async def _show_cards(self, tasks: tuple[Task, ...], shown: list[tuple[int, Text, tuple[str, ...]]]) -> None:
        """Replace the cards (the old ones are gone before the new ones, which reuse
        their ids, are mounted)."""
        listing = self.query_one("#needs-list", VerticalScroll)
        await listing.remove_children()
        if not tasks:
            empty = Text("No task waits for you: no question, review, approval or failure.")
            await listing.mount(Static(empty, id="needs-empty"))
            return
        await listing.mount_all(
            TaskCard(task, text, actions) for task, (_, text, actions) in zip(tasks, shown, strict=True)
        )

    def task_of(self, task_id: int) -> Task | None:
        return next((t for t in self.tasks if t.id == task_id), None)

    # --- the buttons ---------------------------------------------------------------------
    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        card = next((node for node in event.button.ancestors if isinstance(node, TaskCard)), None)
        if card is None or event.button.name is None:
            return
        event.stop()
        task = card.task_shown
        {
            "answer": lambda task: ask_and_answer(self, task),
            "approve": self._ask_approve,
            "reject": self._ask_reject,
            "retry": self._retry,
            "diff": self._diff,
            "open": self._open,
        }[event.button.name](task)

    def _ask_approve(self, task: Task) -> None:
        question = Text(f"Approve #{task.id}?", style="bold")
        question.append("\n" + decision_effect(Action.APPROVE, [task]))

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._act(Action.APPROVE, task), group="write", exit_on_error=False)

        self.app.push_screen(ConfirmDialog(question, preview([task], [])), answered)

    def _ask_reject(self, task: Task) -> None:
        title = Text(f"Reject #{task.id}? " + decision_effect(Action.REJECT, [task]), style="bold")

        def answered(reason: str | None) -> None:
            if reason:
                self.run_worker(self._act(Action.REJECT, task, reason), group="write", exit_on_error=False)

        self.app.push_screen(ReasonForm(title, label="Reason (required; kept with the task)", required=True), answered)

    def _retry(self, task: Task) -> None:
        self.run_worker(self._act(Action.RETRY, task), group="write", exit_on_error=False)

    @guarded("changing the task")
    async def _act(self, action: Action, task: Task, reason: str | None = None) -> None:
        async with self.ctx.writes:
            report = await apply(self.ctx.store, action, task, reason=reason, actor=self.ctx.actor)
        self.notify(report.message, severity="information" if report.ok else "warning", markup=False)
        self.reload()

    def _diff(self, task: Task) -> None:
        from tui.diff_screen import DiffScreen

        self.app.push_screen(DiffScreen(self.ctx, task.id))

    def _open(self, task: Task) -> None:
        from tui.task_screen import open_task

        open_task(self.app, self.ctx, task.id)
