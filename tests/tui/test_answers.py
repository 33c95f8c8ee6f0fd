"""A person answers a waiting task from the dashboard (``w`` on the task screen, the
question shown above the answer box), unblocks a blocked one (``u``), and finds
waiting tasks by their count in the header; on real SQLite, driven with Pilot."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import shown_ids, table
from tui.answer_dialog import AnswerDialog, chosen_answer
from tui.app import VigilApp
from tui.forms import ReasonForm
from tui.header import counts_markup
from tui.task_screen import TaskScreen
from vigil.models import Outcome, OutcomeKind, TaskStatus
from vigil.store import Store

pytestmark = pytest.mark.slow


async def _waiting(db: Store, subject: str = "Deploy the release") -> int:
    """A task whose agent asked "Deploy to staging or to prod?" (choices staging, prod)."""
    task_id = await add(db, subject)
    claim = await db.claim_next(worker="w", lease_ms=600_000)
    assert claim is not None
    assert claim.task.id == task_id
    await db.ask(task_id, "Deploy to staging or to prod?", ["staging", "prod"], actor="agent")
    await db.record(claim, Outcome(OutcomeKind.SUCCESS), worker="w")
    return task_id


def enabled_actions(app: VigilApp) -> dict[str, bool]:
    return {b.action: enabled for _, b, enabled, _ in app.screen.active_bindings.values()}


def _shown_status(app: VigilApp) -> TaskStatus | None:
    """The status of the task the task screen in front shows (None: none shown)."""
    screen = app.screen
    return screen.detail.task.status if isinstance(screen, TaskScreen) and screen.detail is not None else None


async def _open(app: VigilApp, pilot: object, task_id: int) -> None:
    assert table(app).select_id(task_id)
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")


async def test_w_answers_the_open_task_with_the_question_above_the_answer_box(make_app: AppFactory, db: Store) -> None:
    task_id = await _waiting(db)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: task_id in shown_ids(app), "the waiting task in the queue")
        await _open(app, pilot, task_id)
        assert enabled_actions(app)["answer"] is True
        palette = [command.title for command in app.get_system_commands(app.screen)]
        assert "Answer (w)" in palette
        await pilot.press("w")
        await wait_for(lambda: isinstance(app.screen, AnswerDialog), "answer dialog")
        dialog = app.screen
        shown = str(dialog.query_one("#question", Static).render())
        assert "The agent asks: Deploy to staging or to prod?" in shown
        assert "1. staging" in shown
        assert "2. prod" in shown
        widgets = [w.id for w in dialog.query("#question, #answer")]
        assert widgets == ["question", "answer"]  # the question above the box
        await pilot.press("2", "enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen), "back on the task")
        await wait_for(lambda: _shown_status(app) is TaskStatus.PENDING, "the task shows pending")
        assert enabled_actions(app)["answer"] is False  # answered: dimmed now
    task = await db.get_task(task_id)
    assert (task.status, task.answer, task.attempt_count) == (TaskStatus.PENDING, "prod", 0)
    assert [(n.author, n.text) for n in await db.list_notes(task_id)] == [("human", "answer: prod")]


async def test_escape_in_the_answer_dialog_answers_nothing(make_app: AppFactory, db: Store) -> None:
    task_id = await _waiting(db)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: task_id in shown_ids(app), "the waiting task in the queue")
        await _open(app, pilot, task_id)
        await pilot.press("w")
        await wait_for(lambda: isinstance(app.screen, AnswerDialog), "answer dialog")
        await pilot.press(*"staging", "escape")
        await wait_for(lambda: isinstance(app.screen, TaskScreen), "back on the task")
    assert (await db.get_task(task_id)).status is TaskStatus.WAITING


async def test_u_unblocks_a_blocked_task_with_a_note(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "Needs the VPN")
    await db.close_task(task_id, TaskStatus.BLOCKED, "no VPN", actor="agent")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: task_id in shown_ids(app), "the blocked task in the queue")
        await _open(app, pilot, task_id)
        assert (enabled_actions(app)["unblock"], enabled_actions(app)["answer"]) == (True, False)
        await pilot.press("u")
        await wait_for(lambda: isinstance(app.screen, ReasonForm), "note form")
        await pilot.press(*"VPN is up", "enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen), "back on the task")
        await wait_for(lambda: _shown_status(app) is TaskStatus.PENDING, "the task shows pending")
    assert [(n.author, n.text) for n in await db.list_notes(task_id)] == [("human", "VPN is up")]


async def test_the_header_counts_waiting_tasks_and_w_filters_them(make_app: AppFactory, db: Store) -> None:
    waiting = await _waiting(db)
    other = await add(db, "routine work")
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(lambda: set(shown_ids(app)) == {waiting, other}, "rows")
        await pilot.press("W")
        await wait_for(lambda: shown_ids(app) == [waiting], "only the waiting task")
    assert "[u]W[/u]aiting 1" in counts_markup({"waiting": 1}, ())


def test_a_bare_number_picks_a_choice_and_anything_else_is_the_answer() -> None:
    choices = ("staging", "prod")
    assert chosen_answer(" 2 ", choices) == "prod"
    assert chosen_answer("3", choices) == "3"
    assert chosen_answer("prod, after the freeze", choices) == "prod, after the freeze"
    assert chosen_answer("1", ()) == "1"
