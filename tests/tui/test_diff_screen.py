"""The task screen's Diff view (``D``) on a real repository: the file list with its
counts, the syntax-coloured diff of the file chosen, scrolling; approve (merge)
and request changes for a task awaiting review; a read-only TUI offers neither."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from rich.syntax import Syntax
from textual.containers import VerticalScroll
from textual.widgets import OptionList, Static

from tests.code.repos import Repo, worked_clone
from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import notes, shown_ids
from tui.app import VigilApp
from tui.dialogs import ConfirmDialog
from tui.diff_screen import DiffScreen
from tui.forms import ReasonForm
from tui.task_screen import TaskScreen
from vigil.codework import Worktree
from vigil.config import Settings
from vigil.home import scratch_path
from vigil.models import Outcome, OutcomeKind, TaskStatus
from vigil.store import Store

pytestmark = pytest.mark.slow

LONG = "".join(f"line {n}\n" for n in range(300))


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app", {"parser.py": "one\ntwo\n", "README.md": "app\n"})


async def awaiting_review(
    db: Store, settings: Settings, repo: Repo, merge: str = "squash", extra: dict[str, str] | None = None
) -> tuple[int, Worktree]:
    """A task whose 'agent' changed two files (and ``extra``), now awaiting review."""
    task_id = await add(db, "Fix the parser")
    files = {"parser.py": "one\n2\n", "long.txt": LONG, **(extra or {})}
    made = worked_clone(repo, scratch_path(settings.home, task_id), files, task_id=task_id, message="fix the parser")
    made = replace(made, merge=merge)
    await db.set_worktree(task_id, made)
    claim = await db.claim_next(worker="d", lease_ms=60_000)
    assert claim is not None
    await db.record(claim, Outcome(OutcomeKind.SUCCESS, summary="fixed", review=True), worker="d")
    return task_id, made


async def open_diff(app: VigilApp, pilot: object, task_id: int) -> DiffScreen:
    await wait_for(lambda: shown_ids(app) == [task_id], "the task in the queue")
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
    await pilot.press("D")  # type: ignore[attr-defined]
    await wait_for(lambda: isinstance(app.screen, DiffScreen) and app.screen.loads >= 1, "diff screen")
    screen = app.screen
    assert isinstance(screen, DiffScreen)
    return screen


def body(screen: DiffScreen) -> str:
    shown = screen.query_one("#diff-text", Static).content
    assert isinstance(shown, Syntax)  # syntax-coloured, as a diff
    assert type(shown.lexer).__name__ == "DiffLexer"
    return shown.code


async def test_the_diff_view_lists_files_with_counts_and_shows_the_chosen_files_diff(
    make_app: AppFactory, db: Store, settings: Settings, repo: Repo
) -> None:
    task_id, made = await awaiting_review(db, settings, repo)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_diff(app, pilot, task_id)
        title = str(screen.query_one("#diff-title", Static).render())
        assert made.artifact is not None
        assert f"{made.artifact[:12]} against main: 2 files, +301 -1" in title
        assert "awaiting review: a approves (squash)" in title
        files = screen.query_one("#diff-files", OptionList)
        rows = [str(files.get_option_at_index(i).prompt) for i in range(files.option_count)]
        assert rows == ["+301 -1 all files", "+300 -0 long.txt", "+1 -1 parser.py"]
        assert "+line 299" in body(screen)
        assert "+2" in body(screen)
        scroll = screen.query_one("#diff-body", VerticalScroll)
        assert scroll.max_scroll_y > 0  # longer than the screen: it scrolls
        scroll.focus()
        await pilot.press("end")
        await wait_for(lambda: scroll.scroll_y == scroll.max_scroll_y, "scrolled to the end")
        files.focus()
        await pilot.press("down", "down")  # parser.py
        await wait_for(lambda: "line 299" not in body(screen), "only parser.py's diff")
        assert "-two" in body(screen)
        assert "+2" in body(screen)
        assert scroll.scroll_y == 0  # a new file starts at its top
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, TaskScreen), "back on the task screen")


async def test_files_that_configure_tools_lead_the_list_with_a_marker(
    make_app: AppFactory, db: Store, settings: Settings, repo: Repo
) -> None:
    extra = {".claude/settings.json": "{}\n", ".gitattributes": "* -diff\n"}
    task_id, _ = await awaiting_review(db, settings, repo, extra=extra)
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_diff(app, pilot, task_id)
        files = screen.query_one("#diff-files", OptionList)
        rows = [str(files.get_option_at_index(i).prompt) for i in range(files.option_count)]
    assert rows[1].startswith("! +1 -0 .claude/settings.json  (Claude Code's settings")
    assert rows[2].startswith("! +1 -0 .gitattributes  (git attributes")
    assert rows[3:] == ["+300 -0 long.txt", "+1 -1 parser.py"]


async def test_approve_in_the_diff_view_merges_the_branch(
    make_app: AppFactory, db: Store, settings: Settings, repo: Repo
) -> None:
    task_id, made = await awaiting_review(db, settings, repo)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_diff(app, pilot, task_id)
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "the confirmation")
        question = str(app.screen.query_one(Static).render())
        assert made.artifact is not None
        assert f"{made.artifact[:12]} is merged into main (squash)" in question
        await pilot.press("y")
        await wait_for(lambda: any("merged into main (squash)" in n for n in notes(app)), "the report")
        await wait_for(lambda: screen.data is not None and screen.data.task.status is TaskStatus.COMPLETED, "reload")
        assert "merged (squash)" in str(screen.query_one("#diff-title", Static).render())
    assert repo.show("main", "parser.py") == "one\n2"
    task = await db.get_task(task_id)
    assert (task.status, task.review) == (TaskStatus.COMPLETED, "approved")
    assert task.worktree is not None
    assert task.worktree.merged == repo.tip("main")


async def test_approve_lands_only_the_change_shown_not_one_that_replaced_it(
    make_app: AppFactory, db: Store, settings: Settings, repo: Repo
) -> None:
    task_id, made = await awaiting_review(db, settings, repo)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await open_diff(app, pilot, task_id)
        # the task's change is replaced after the diff was shown
        other = repo.git("commit-tree", "-p", made.start, "-m", "unreviewed", f"{made.start}^{{tree}}")
        await db.set_worktree(task_id, replace(made, artifact=other))
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "the confirmation")
        await pilot.press("y")
        await wait_for(lambda: any("not the" in n and "you reviewed" in n for n in notes(app)), "the refusal")
    before = repo.tip("main")
    assert repo.tip("main") == before == made.start
    assert (await db.get_task(task_id)).awaiting_review


async def test_request_changes_sends_the_comment_to_the_agent(
    make_app: AppFactory, db: Store, settings: Settings, repo: Repo
) -> None:
    task_id, _ = await awaiting_review(db, settings, repo)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await open_diff(app, pilot, task_id)
        await pilot.press("c")
        await wait_for(lambda: isinstance(app.screen, ReasonForm), "the comment form")
        await pilot.press(*"keep two as a word", "enter")
        await wait_for(lambda: any("changes requested" in n for n in notes(app)), "the report")
    task = await db.get_task(task_id)
    assert (task.status, task.review) == (TaskStatus.PENDING, "rejected")
    assert [(n.author, n.text) for n in await db.list_notes(task_id)] == [("human", "review: keep two as a word")]
    assert repo.show("main", "parser.py") == "one\ntwo"


async def test_read_only_the_diff_shows_but_approve_and_changes_are_not_offered(
    make_app: AppFactory, db: Store, settings: Settings, repo: Repo
) -> None:
    task_id, _ = await awaiting_review(db, settings, repo)
    app = make_app(readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_diff(app, pilot, task_id)
        assert screen.check_action("approve", ()) is False
        assert screen.check_action("request_changes", ()) is False
        await pilot.press("a")
        await pilot.pause()
        assert app.screen is screen
    assert (await db.get_task(task_id)).awaiting_review


async def test_the_diff_key_is_dimmed_for_a_task_without_a_branch(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "no repository")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "the task")
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
        assert app.screen.check_action("diff", ()) is None
        await pilot.press("D")
        await pilot.pause()
        assert isinstance(app.screen, TaskScreen)
