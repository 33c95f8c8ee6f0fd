"""The diff of a task's branch (``D`` on the task screen): review it, then approve
or request changes.

On the left, the files the branch changes with the lines added and removed (the
first row is every file); on the right, the diff, syntax-coloured and scrollable,
of the file chosen (``tab`` moves between the two). It is what ``vigil task diff``
prints: the branch against its base, what an approval merges (once merged, what it
merged), with every control character of the agent's content shown as an escape
(``\x1b``), never passed to the terminal. It is read again when the task changes.

For a task awaiting review, ``a`` approves it: its branch is merged into its base
as its ``merge`` says, or, on a conflict, it goes back to its agent with the
conflict named (``vigil.review``, as ``vigil task approve``); ``c`` requests
changes with a comment, which the agent's next attempt reads. Neither is offered
read-only or for a task that does not await review.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui.context import Context
from tui.dialogs import ConfirmDialog, preview
from tui.forms import ReasonForm
from tui.keybar import KeyBar
from tui.live import Banner, LiveScreen
from tui.safety import guarded
from tui.tabs import LoopLine, TabBar
from vigil.codework import DEFAULT_MERGE
from vigil.errors import TaskNotFound, VigilError
from vigil.git import FileChange
from vigil.models import Task
from vigil.printable import printable
from vigil.review import approve, request_changes
from vigil.taskdiff import TaskDiff, task_diff

ALL_FILES = "*"  # the file list's first row: the whole diff


@dataclass(frozen=True)
class DiffData:
    """The task as it is, and its diff (None, with ``problem`` saying why, when there
    is none to show)."""

    task: Task
    diff: TaskDiff | None
    problem: str | None = None


def file_label(change: FileChange, why: str | None = None) -> Text:
    """``+12 -3  path`` (``binary`` for a binary file), counts coloured; a file to
    look at first (``why`` it is) gets a ``!`` and the reason."""
    label = Text("! ", style="bold red") if why is not None else Text()
    if change.added is None:
        label.append("binary ", style="yellow")
    else:
        label.append(f"+{change.added}", style="green")
        label.append(f" -{change.removed} ", style="red")
    label.append(printable(change.path))
    if why is not None:
        label.append(f"  ({why})", style="red")
    return label


def file_patch(patch: str, path: str) -> str:
    """The part of a unified diff about ``path`` (``ALL_FILES``: all of it)."""
    if path == ALL_FILES:
        return patch
    parts = patch.split("\ndiff --git ")
    sections = [parts[0], *("diff --git " + part for part in parts[1:])]
    return "\n".join(s for s in sections if s.startswith("diff --git ") and f" b/{path}" in s.split("\n", 1)[0])


class DiffScreen(LiveScreen[DiffData | None]):
    TITLE = "Diff"
    DEFAULT_CSS = """
    DiffScreen #diff-title { height: auto; padding: 0 1; }
    DiffScreen #diff-files { width: 36; max-width: 40%; height: 1fr; }
    DiffScreen #diff-body { width: 1fr; height: 1fr; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace,q", "back", "Back", tooltip="back to the task"),
        Binding("a", "approve", "Approve", tooltip="approve the result: merge its branch into its base"),
        Binding("c", "request_changes", "Changes", tooltip="request changes: a comment the agent reads next"),
    ]

    def __init__(self, ctx: Context, task_id: int) -> None:
        super().__init__(ctx, name=f"diff-{task_id}")
        self.task_id = task_id
        self.data: DiffData | None = None
        self._file = ALL_FILES

    def compose(self) -> ComposeResult:
        yield Banner()
        yield TabBar("task", self.ctx.home_label)
        yield LoopLine(self.ctx)
        yield Static(id="diff-title")
        with Horizontal():
            yield OptionList(id="diff-files")
            with VerticalScroll(id="diff-body"):
                yield Static(id="diff-text")
        yield KeyBar(self.ctx)

    async def load(self) -> DiffData | None:
        try:
            task = await self.ctx.store.get_task(self.task_id)
        except TaskNotFound:
            return None
        if task.worktree is None:
            return DiffData(task, None, "this task has no branch: it works on no repository, or has not run yet")
        try:
            return DiffData(task, await asyncio.to_thread(task_diff, task.worktree))
        except VigilError as err:  # the repository or the branch is gone
            return DiffData(task, None, str(err))

    def apply(self, data: DiffData | None) -> None:
        self.data = data
        title = self.query_one("#diff-title", Static)
        if data is None:
            title.update(Text(f"task #{self.task_id} no longer exists", style="red"))
            return
        title.update(self._title(data))
        files = self.query_one("#diff-files", OptionList)
        diff = data.diff
        flags = {} if diff is None else {flag.path: flag.why for flag in diff.flags}
        # the files to look at first lead the list
        ordered = [] if diff is None else sorted(diff.files, key=lambda f: f.path not in flags)
        shown = [f.path for f in ordered]
        if [option.id for option in files.options][1:] != shown:
            files.clear_options()
            if diff is not None:
                total = Text(f"+{diff.added}", style="green").append(f" -{diff.removed} ", style="red")
                files.add_options([Option(total.append("all files"), id=ALL_FILES)])
                files.add_options([Option(file_label(f, flags.get(f.path)), id=f.path) for f in ordered])
                files.highlighted = 0
            if self._file not in (ALL_FILES, *shown):
                self._file = ALL_FILES
        self._show_file()
        self.refresh_bindings()

    def _title(self, data: DiffData) -> Text:
        task, diff = data.task, data.diff
        title = Text(f"#{task.id} ", style="bold").append(printable(task.subject), style="bold")
        if diff is None:
            return title.append(f"\n{data.problem}", style="yellow")
        worktree = diff.worktree
        count = len(diff.files)
        title.append(f"\n{diff.until[:12]} against {worktree.base}: {count} file{'' if count == 1 else 's'}, ")
        title.append(f"+{diff.added}", style="green").append(" ").append(f"-{diff.removed}", style="red")
        if worktree.merged is not None:
            how = "left for a pull request" if worktree.merge == "branch" else f"merged ({worktree.merge})"
            title.append(f"  {how} at {worktree.merged[:12]}", style="dim")
        elif task.awaiting_review:
            mode = worktree.merge or DEFAULT_MERGE
            title.append(f"  awaiting review: a approves ({mode}), c requests changes", style="yellow")
        return title

    def _show_file(self) -> None:
        body = self.query_one("#diff-text", Static)
        diff = self.data.diff if self.data is not None else None
        if diff is None:
            body.update("")
            return
        # the agent wrote it: escapes are shown as text (and coloured as the diff), never obeyed
        text = printable(file_patch(diff.patch, self._file))
        body.update(Syntax(text, "diff", theme="ansi_dark", word_wrap=False) if text else Text("(no changes)"))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        chosen = event.option.id or ALL_FILES
        if chosen != self._file:
            self._file = chosen
            self._show_file()
            self.query_one("#diff-body", VerticalScroll).scroll_home(animate=False)

    def action_back(self) -> None:
        self.app.pop_screen()

    # --- review ---------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action not in ("approve", "request_changes"):
            return True
        if self.ctx.readonly:
            return False
        task = self.data.task if self.data is not None else None
        return True if task is not None and task.awaiting_review else None

    def action_approve(self) -> None:
        if self.data is None or not self.data.task.awaiting_review:
            return
        task = self.data.task
        worktree = task.worktree
        shown = self.data.diff.until if self.data.diff is not None else None
        question = Text(f"Approve #{task.id}?", style="bold")
        if worktree is not None and worktree.merged is None:
            mode = worktree.merge or DEFAULT_MERGE
            change = (shown or "the change")[:12]
            then = (
                f"{change} is left on {worktree.branch} for a pull request"
                if mode == "branch"
                else f"{change} is merged into {worktree.base} ({mode}); a conflict sends it back"
            )
            question.append(f"\nIt completes, and {then}.", style="yellow")

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._approve(task, shown), group="write", exit_on_error=False)

        self.app.push_screen(ConfirmDialog(question, preview([task], [])), answered)

    def action_request_changes(self) -> None:
        if self.data is None or not self.data.task.awaiting_review:
            return
        task = self.data.task

        def answered(comment: str | None) -> None:
            if comment:
                self.run_worker(self._request_changes(task, comment), group="write", exit_on_error=False)

        title = Text(f"Request changes to #{task.id}? It goes back to its agent.", style="bold")
        label = "What should change (the agent reads it; kept as a note)"
        self.app.push_screen(ReasonForm(title, label=label, required=True, details=preview([task], [])), answered)

    @guarded("approving the task")
    async def _approve(self, task: Task, shown: str | None) -> None:
        """Approve exactly the change shown (``shown``: None for a task without one)."""
        async with self.ctx.writes:
            done = await approve(
                self.ctx.store, task.id, actor=self.ctx.actor, commit=shown, github=self.ctx.settings.github
            )
        self.notify(done.describe(), severity="warning" if done.conflict else "information", markup=False)
        self.reload()

    @guarded("requesting changes")
    async def _request_changes(self, task: Task, comment: str) -> None:
        async with self.ctx.writes:
            back = await request_changes(self.ctx.store, task.id, comment, actor=self.ctx.actor)
        self.notify(f"#{back.id}: changes requested; back to its agent", markup=False)
        self.reload()
