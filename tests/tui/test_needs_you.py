"""The Needs you screen (key 6; the first screen at 60 columns or fewer): what waits
for a person, most urgent first, every action a button, nothing wider than the
screen. Driven with Pilot at 40, 60 and 80 columns on real SQLite; the buttons are
clicked, never their keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, Static

from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import notes
from tui.answer_dialog import AnswerDialog
from tui.app import VigilApp
from tui.dialogs import ConfirmDialog
from tui.forms import ReasonForm
from tui.needs_you_screen import NeedsYouScreen, TaskCard
from tui.queue_screen import QueueScreen
from tui.task_screen import TaskScreen
from vigil.clock import ManualClock
from vigil.config import Settings
from vigil.models import ApprovalState, Outcome, OutcomeKind, TaskStatus
from vigil.store import Store, open_store

pytestmark = pytest.mark.slow  # each test runs the app for a second or more


async def waiting(db: Store, subject: str, priority: int = 5) -> int:
    task_id = await add(db, subject, priority=priority)
    claim = await db.claim_next(worker="w", lease_ms=600_000)
    assert claim is not None
    assert claim.task.id == task_id
    await db.ask(task_id, "Deploy to staging or to prod?", ["staging", "prod"], actor="agent")
    await db.record(claim, Outcome(OutcomeKind.SUCCESS), worker="w")
    return task_id


async def reviewed(db: Store, subject: str) -> int:
    task_id = await add(db, subject)
    claim = await db.claim_next(worker="w", lease_ms=600_000)
    assert claim is not None
    assert claim.task.id == task_id
    denied = Outcome(OutcomeKind.SUCCESS, summary="rotated the keys", permission_denials=("Bash: rm -rf build",))
    await db.record(claim, denied, worker="w")
    assert (await db.get_task(task_id)).awaiting_review
    return task_id


async def failed(db: Store, subject: str) -> int:
    task_id = await add(db, subject, max_retries=0)
    claim = await db.claim_next(worker="w", lease_ms=600_000)
    assert claim is not None
    assert claim.task.id == task_id
    await db.record(claim, Outcome(OutcomeKind.FAILED, summary="the build broke"), worker="w")
    assert (await db.get_task(task_id)).status is TaskStatus.FAILED
    return task_id


def cards(app: VigilApp) -> list[int]:
    """The tasks of the cards shown, once laid out (their buttons can be clicked)."""
    shown = list(app.screen.query(TaskCard))
    # every card has a button at least (Open); until each is placed the card is not ready
    if not all(card.query(Button) and all(b.region.width for b in card.query(Button)) for card in shown):
        return [-1]  # mounted, not yet composed or laid out
    return [card.task_shown.id for card in shown]


def buttons(app: VigilApp, task_id: int) -> list[str]:
    card = app.screen.query_one(f"#card-{task_id}", TaskCard)
    return [str(button.label) for button in card.query(Button)]


async def tap(pilot: Pilot[str], selector: str) -> None:
    """Click the widget once it is laid out (a dialog just pushed has no place yet)."""
    app = pilot.app

    def placed() -> bool:
        found = app.screen.query(selector)
        return bool(found) and found.first().region.width > 0

    await wait_for(placed, f"{selector} on screen")
    assert await pilot.click(selector), selector


def overflowing(app: VigilApp) -> list[str]:
    """Widgets of the screen drawn past its right edge (a horizontal scroll)."""
    width = app.screen.size.width
    drawn = list(app.screen.query("TaskCard, TaskCard *"))
    assert drawn
    assert all(widget.region.width for widget in drawn)
    return [repr(widget) for widget in drawn if widget.region.right > width]


@pytest.mark.parametrize(("width", "opens_on"), [(40, NeedsYouScreen), (60, NeedsYouScreen), (80, QueueScreen)])
async def test_the_app_opens_on_needs_you_at_60_columns_or_fewer_and_nothing_is_wider_than_the_screen(
    make_app: AppFactory, db: Store, width: int, opens_on: type
) -> None:
    late = await failed(db, "Nightly build")
    review = await reviewed(db, "Rotate the staging keys " + "with a long subject " * 10)
    asked = await waiting(db, "Deploy the release", priority=3)
    approval = await add(db, "Drop the old table", requires_approval=True)
    await add(db, "An ordinary pending task")
    app = make_app()
    async with app.run_test(size=(width, 40)) as pilot:
        await wait_for(lambda: isinstance(app.screen, opens_on), f"{opens_on.__name__} first")
        if width > 60:
            await pilot.press("6")  # the terminal dashboard's key for it
            await wait_for(lambda: isinstance(app.screen, NeedsYouScreen), "needs you")
        await wait_for(lambda: len(cards(app)) == 4, "four cards")
        # most urgent first: a question, a review, an approval, a failure; the pending task not at all
        assert cards(app) == [asked, review, approval, late]
        assert buttons(app, asked) == ["Answer", "Open"]
        assert buttons(app, review) == ["Approve", "Reject", "Open"]
        assert buttons(app, approval) == ["Approve", "Reject", "Open"]
        assert buttons(app, late) == ["Retry", "Open"]
        text = str(app.screen.query_one(f"#card-{asked}", TaskCard).query_one(Static).render())
        assert "Q: Deploy to staging or to prod?" in text
        assert "1. staging" in text
        await pilot.pause()
        assert overflowing(app) == []
        title = str(app.screen.query_one("#needs-title", Static).render())
        assert "4 tasks" in title


async def test_answer_approve_reject_and_retry_by_touch_at_40_columns(make_app: AppFactory, db: Store) -> None:
    asked = await waiting(db, "Deploy the release")
    review = await reviewed(db, "Rotate the keys")
    approval = await add(db, "Drop the old table", requires_approval=True)
    late = await failed(db, "Nightly build")
    app = make_app()
    async with app.run_test(size=(40, 40)) as pilot:
        await wait_for(lambda: len(cards(app)) == 4, "four cards")
        # answer: the dialog shows the question; the answer is a choice's number
        await tap(pilot, f"#answer-{asked}")
        await wait_for(lambda: isinstance(app.screen, AnswerDialog), "answer dialog")
        await pilot.press("2")
        await tap(pilot, "#ok")
        await wait_for(lambda: asked not in cards(app), "the answered task leaves")
        # approve the reviewed result, after the confirmation (its Yes clicked)
        await tap(pilot, f"#approve-{review}")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "confirmation")
        await tap(pilot, "#yes")
        await wait_for(lambda: review not in cards(app), "the approved task leaves")
        # reject the approval with a reason
        await tap(pilot, f"#reject-{approval}")
        await wait_for(lambda: isinstance(app.screen, ReasonForm), "reason form")
        await pilot.press(*"not now")
        await tap(pilot, "#ok")
        await wait_for(lambda: approval not in cards(app), "the rejected task leaves")
        # retry the failure
        await tap(pilot, f"#retry-{late}")
        await wait_for(lambda: cards(app) == [], "nothing waits")
        assert any(f"#{review} approved" in note for note in notes(app))
    answered = await db.get_task(asked)
    assert (answered.status, answered.answer) == (TaskStatus.PENDING, "prod")
    approved = await db.get_task(review)
    assert (approved.status, approved.review) == (TaskStatus.COMPLETED, ApprovalState.APPROVED)
    assert (await db.get_task(approval)).status is TaskStatus.CANCELED
    assert (await db.get_task(late)).status is TaskStatus.PENDING
    for task_id in (asked, review, approval, late):
        people = {e.actor for e in await db.list_events(task_id) if e.actor not in ("agent", "dispatcher", "w")}
        assert people <= {"human"}, people


async def test_open_shows_the_task_and_read_only_offers_no_writes(make_app: AppFactory, db: Store) -> None:
    asked = await waiting(db, "Deploy the release")
    app = make_app(readonly=True)
    async with app.run_test(size=(60, 30)) as pilot:
        await wait_for(lambda: cards(app) == [asked], "the card")
        assert buttons(app, asked) == ["Open"]
        await tap(pilot, f"#open-{asked}")
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
        assert isinstance(app.screen, TaskScreen)
        assert app.screen.task_id == asked


async def test_a_browser_sessions_writes_are_audited_as_a_person_with_the_session_named(
    db: Store, settings: Settings, clock: ManualClock
) -> None:
    review = await reviewed(db, "Rotate the keys")
    app = VigilApp(
        settings,
        opener=lambda: open_store(settings, clock),
        clock=clock,
        actor="human (browser session ab12cd)",
        open_task_id=review,
    )
    async with app.run_test(size=(50, 30)) as pilot:
        # a link to a task opens its screen over Needs you
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "the linked task")
        assert isinstance(app.screen, TaskScreen)
        assert app.screen.task_id == review
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, NeedsYouScreen), "needs you under it")
        await wait_for(lambda: cards(app) == [review], "the card")
        await tap(pilot, f"#approve-{review}")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "confirmation")
        await tap(pilot, "#yes")
        await wait_for(lambda: cards(app) == [], "approved")
    events = [(e.kind, e.actor) for e in await db.list_events(review) if e.kind in ("status", "review")]
    assert ("status", "human (browser session ab12cd)") in events


async def test_a_branch_is_reviewed_and_merged_by_touch_through_diff_and_its_footer(
    make_app: AppFactory, db: Store, settings: Settings, tmp_path: Path
) -> None:
    from tests.code.repos import Repo
    from tests.tui.test_diff_screen import awaiting_review
    from tui.diff_screen import DiffScreen
    from tui.keybar import KeyBar

    repo = Repo.make(tmp_path / "app", {"parser.py": "one\ntwo\n", "README.md": "app\n"})
    task_id, _ = await awaiting_review(db, settings, repo)
    app = make_app()
    async with app.run_test(size=(50, 30)) as pilot:
        await wait_for(lambda: cards(app) == [task_id], "the card")
        assert buttons(app, task_id) == ["Diff", "Open"]  # a branch is approved where its diff is
        await tap(pilot, f"#diff-{task_id}")
        await wait_for(lambda: isinstance(app.screen, DiffScreen) and app.screen.loads >= 1, "the diff")
        await pilot.pause()
        footer = app.screen.query_one(KeyBar)
        line = str(footer.render())
        assert "a Approve" in line, line
        assert await pilot.click(KeyBar, offset=(line.index("a Approve") + 3, 0))
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "the merge's confirmation")
        await tap(pilot, "#yes")
        await wait_for(lambda: any(f"#{task_id}" in note and "merged" in note for note in notes(app)), "merged")
    assert (await db.get_task(task_id)).status is TaskStatus.COMPLETED
    assert repo.show("main", "parser.py") == "one\n2"
