"""The guardrails in the TUI, on real SQLite: approve and reject tasks that wait for
a person (`a`, `R`), pause and resume the loop (`L`), and the budget line on the
costs screen. Another writer is a second connection (``db``) or a real ``vigil``
subprocess, as in production."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Static

from tests.conftest import VigilRunner
from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import notes, queue, shown_ids, table
from tui.app import VigilApp
from tui.costs_screen import CostsScreen
from tui.dialogs import ConfirmDialog, HelpScreen
from tui.forms import ReasonForm
from tui.task_screen import TaskScreen
from vigil.clock import ManualClock
from vigil.config import load_settings
from vigil.gate import GateState, read_gate, trip
from vigil.models import ApprovalState, Outcome, OutcomeKind, TaskStatus
from vigil.store import Store, open_store

pytestmark = pytest.mark.slow


def loop_line(app: VigilApp) -> str:
    """The header's loop line and, under it, a closed gate's line."""
    header = queue(app)
    return f"{header.query_one('#loop').render()}\n{header.query_one('#gate').render()}"


def enabled_actions(app: VigilApp) -> dict[str, bool]:
    return {b.action: enabled for _, b, enabled, _ in app.screen.active_bindings.values()}


def open_task_waits(app: VigilApp) -> bool | None:
    """Whether the task screen in front shows its task awaiting approval (None: no task screen)."""
    screen = app.screen
    if isinstance(screen, TaskScreen) and screen.detail is not None:
        return screen.detail.task.awaiting_approval
    return None


async def approval_events(db: Store, task_id: int) -> list[tuple[str, str | None, str | None, str]]:
    return [(e.kind, e.from_value, e.to_value, e.actor) for e in await db.list_events(task_id) if e.kind == "approval"]


# --- approve and reject ------------------------------------------------------------------


async def test_a_approves_the_highlighted_task_after_a_confirmation(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "rotate the production keys", requires_approval=True)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        assert enabled_actions(app)["approve"] is True
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "confirmation")
        await pilot.press("y")
        await wait_for(lambda: table(app).tasks[task_id].status is TaskStatus.PENDING, "pending on screen")
        assert f"#{task_id} approved; pending" in notes(app)
        task = await db.get_task(task_id)
        assert (task.status, task.approval) == (TaskStatus.PENDING, ApprovalState.APPROVED)
        assert [event[3] for event in await approval_events(db, task_id)] == ["human"]
        assert enabled_actions(app)["approve"] is False  # approved: the key is dimmed now


async def held_for_review(db: Store, subject: str) -> int:
    """A task whose run succeeded with refused actions: blocked, awaiting review."""
    task_id = await add(db, subject)
    claim = await db.claim_next(worker="w", lease_ms=60_000)
    assert claim is not None
    denied = Outcome(OutcomeKind.SUCCESS, summary="done", permission_denials=("Bash: rm -rf build",))
    await db.record(claim, denied, worker="w")
    assert (await db.get_task(task_id)).awaiting_review
    return task_id


async def test_a_and_shift_r_decide_a_reviewed_result_too(make_app: AppFactory, db: Store) -> None:
    accepted = await held_for_review(db, "clean the build folder")
    sent_back = await held_for_review(db, "tidy the logs")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: set(shown_ids(app)) == {accepted, sent_back}, "rows")
        assert table(app).select_id(accepted)
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "confirmation")
        shown = " ".join(str(w.render()) for w in app.screen.query(Static))
        assert "Its result is accepted: it completes." in shown
        await pilot.press("y")
        await wait_for(lambda: f"#{accepted} approved; completed" in notes(app), "approved")
        assert table(app).select_id(sent_back)
        await pilot.press("R")
        await wait_for(lambda: isinstance(app.screen, ReasonForm), "reason form")
        await pilot.press(*"not in the logs folder", "enter")
        await wait_for(lambda: f"#{sent_back} rejected; pending" in notes(app), "rejected")
    done, again = await db.get_task(accepted), await db.get_task(sent_back)
    assert (done.status, done.review) == (TaskStatus.COMPLETED, ApprovalState.APPROVED)
    assert (again.status, again.review) == (TaskStatus.PENDING, ApprovalState.REJECTED)
    assert [n.text for n in await db.list_notes(sent_back)] == ["review: not in the logs folder"]


async def test_declining_the_confirmation_approves_nothing(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "drop the old table", requires_approval=True)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "confirmation")
        await pilot.press("n")
        await wait_for(lambda: app.screen is queue(app), "back on the queue")
        assert (await db.get_task(task_id)).awaiting_approval


async def test_shift_r_rejects_with_the_reason_typed(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "email every customer", requires_approval=True)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("R")
        await wait_for(lambda: isinstance(app.screen, ReasonForm), "reason form")
        await pilot.press("enter")  # an empty reason is refused in the form
        form = app.screen
        assert isinstance(form, ReasonForm)
        assert "a reason is needed" in str(form.query_one("#error").render())
        assert (await db.get_task(task_id)).awaiting_approval
        await pilot.press(*"not this week", "enter")
        await wait_for(lambda: task_id not in shown_ids(app), "rejected task leaves the open queue")
        assert f"#{task_id} rejected; canceled" in notes(app)
        task = await db.get_task(task_id)
        assert (task.status, task.approval) == (TaskStatus.CANCELED, ApprovalState.REJECTED)
        assert "not this week" in (task.result_summary or "")
        events = await approval_events(db, task_id)
        assert [event[3] for event in events] == ["human"]


async def test_escape_in_the_reason_form_rejects_nothing(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "keep me waiting", requires_approval=True)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("R")
        await wait_for(lambda: isinstance(app.screen, ReasonForm), "reason form")
        await pilot.press(*"maybe", "escape")
        await wait_for(lambda: app.screen is queue(app), "back on the queue")
        assert (await db.get_task(task_id)).awaiting_approval


async def test_approve_refused_when_another_person_approved_first(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "deploy to production", requires_approval=True)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("p")  # freeze the screen: the app still shows the task waiting
        await db.approve(task_id, actor="someone-else")
        assert table(app).tasks[task_id].awaiting_approval
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "confirmation")
        await pilot.press("y")
        expected = f"#{task_id} no longer waits for approval or review (it is pending), not approved"
        await wait_for(lambda: expected in notes(app), "refusal shown")
        assert [event[3] for event in await approval_events(db, task_id)] == ["someone-else"]


async def test_reject_refused_when_the_task_was_canceled_meanwhile(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "resize the cluster", requires_approval=True)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("p")
        await db.cancel(task_id, actor="human")
        await pilot.press("R")
        await wait_for(lambda: isinstance(app.screen, ReasonForm), "reason form")
        await pilot.press(*"too risky", "enter")
        expected = f"#{task_id} no longer waits for approval or review (it is canceled), not rejected"
        await wait_for(lambda: expected in notes(app), "refusal shown")
        task = await db.get_task(task_id)
        assert task.approval == ApprovalState.PENDING  # canceled, never rejected
        assert await approval_events(db, task_id) == []


async def test_approve_and_reject_are_dimmed_on_a_task_that_needs_no_approval(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "ordinary work")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        state = enabled_actions(app)
        assert (state["approve"], state["reject"]) == (False, False)
        await pilot.press("a", "R")
        assert app.screen is queue(app)
        task = await db.get_task(task_id)
        assert (task.status, task.approval, task.updated_at) == (TaskStatus.PENDING, None, task.created_at)


async def test_approve_acts_on_every_marked_task_and_skips_the_others(make_app: AppFactory, db: Store) -> None:
    first = await add(db, "first", requires_approval=True)
    plain = await add(db, "plain")
    second = await add(db, "second", requires_approval=True)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 3, "rows")
        for task_id in (first, plain, second):
            assert table(app).select_id(task_id)
            await pilot.press("space")
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "preview")
        await pilot.press("y")
        await wait_for(lambda: any(n.startswith("2 of 2 done") for n in notes(app)), "bulk result")
        assert [(await db.get_task(i)).status for i in (first, plain, second)] == [TaskStatus.PENDING] * 3
        assert [(await db.get_task(i)).approval for i in (first, plain, second)] == [
            ApprovalState.APPROVED,
            None,
            ApprovalState.APPROVED,
        ]
        assert not table(app).marks


async def test_task_screen_approves_and_rejects_the_open_task(make_app: AppFactory, db: Store) -> None:
    approved = await add(db, "read me, then approve", requires_approval=True)
    rejected = await add(db, "read me, then reject", requires_approval=True)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 2, "rows")
        for task_id in (approved, rejected):
            assert table(app).select_id(task_id)
            await pilot.press("enter")
            await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
            if task_id == approved:
                await pilot.press("a")
                await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "confirmation")
                await pilot.press("y")
            else:
                await pilot.press("R")
                await wait_for(lambda: isinstance(app.screen, ReasonForm), "reason form")
                await pilot.press(*"wrong quarter", "enter")
            await wait_for(lambda: open_task_waits(app) is False, "task screen shows it handled")
            assert enabled_actions(app)["approve"] is False  # handled: dimmed now
            await pilot.press("escape")
            await wait_for(lambda: app.screen is queue(app), "back")
        assert (await db.get_task(approved)).approval == ApprovalState.APPROVED
        task = await db.get_task(rejected)
        assert (task.status, task.approval) == (TaskStatus.CANCELED, ApprovalState.REJECTED)
        assert "wrong quarter" in (task.result_summary or "")


# --- pause and resume the loop -------------------------------------------------------------


async def test_l_pauses_the_loop_with_a_reason_and_l_again_resumes_it(make_app: AppFactory, db: Store) -> None:
    await add(db, "work")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "loaded")
        assert "paused" not in loop_line(app)
        await pilot.press("L")
        await wait_for(lambda: isinstance(app.screen, ReasonForm), "pause confirmation")
        await pilot.press(*"upgrading the box", "enter")
        await wait_for(lambda: "paused: upgrading the box" in loop_line(app), "header shows the pause")
        gate = await read_gate(db)
        assert (gate.state, gate.reason, gate.by, gate.until) == (GateState.PAUSED, "upgrading the box", "human", None)
        await pilot.press("L")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "resume confirmation")
        await pilot.press("y")
        await wait_for(lambda: "paused" not in loop_line(app), "header shows it running")
        assert (await read_gate(db)).state is GateState.RUNNING
        assert "loop resumed (was paused: upgrading the box)" in notes(app)


async def test_declining_the_pause_leaves_the_loop_running(make_app: AppFactory, db: Store) -> None:
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "loaded")
        await pilot.press("L")
        await wait_for(lambda: isinstance(app.screen, ReasonForm), "pause confirmation")
        await pilot.press("escape")
        await wait_for(lambda: app.screen is queue(app), "back on the queue")
        assert (await db.loop_values()).get("gate") is None


async def test_resume_from_the_tui_lifts_a_guardrail_gate(make_app: AppFactory, db: Store, clock: ManualClock) -> None:
    await trip(db, reason="auth failure: not logged in", until=None, by="guard", now_ms=clock.now_ms())
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: "gated: auth failure" in loop_line(app), "header shows the gate")
        await pilot.press("L")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "resume confirmation")
        dialog = app.screen
        assert "It is gated: auth failure: not logged in" in str(dialog.query("Static").first().render())
        await pilot.press("y")
        await wait_for(lambda: "gated" not in loop_line(app), "gate lifted on screen")
        assert (await read_gate(db)).state is GateState.RUNNING


async def test_header_follows_vigil_pause_and_resume_run_elsewhere(make_app: AppFactory, vigil: VigilRunner) -> None:
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: queue(app).loads >= 1, "loaded")
        result = await asyncio.to_thread(vigil, "pause", "--reason", "maintenance window")
        assert result.returncode == 0, result.stderr
        await wait_for(lambda: "paused: maintenance window" in loop_line(app), "pause shown")
        result = await asyncio.to_thread(vigil, "resume")
        assert result.returncode == 0, result.stderr
        await wait_for(lambda: "paused" not in loop_line(app), "resume shown")


# --- read-only, help and palette -------------------------------------------------------------


async def test_readonly_hides_approve_reject_and_the_loop_key(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "needs a person", requires_approval=True)
    app = make_app(readonly=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("a", "R", "L")
        await pilot.pause()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert app.screen is queue(app)
        assert not enabled_actions(app).keys() & {"approve", "reject", "loop_gate"}  # hidden, not dimmed
        assert not any(t.startswith(("Approve", "Reject", "Pause loop", "Resume loop")) for t in titles)
        assert (await db.get_task(task_id)).awaiting_approval
        assert (await db.loop_values()).get("gate") is None


async def test_help_and_palette_offer_approve_reject_and_the_loop(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "waits", requires_approval=True)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for words in ("Approve (a)", "Reject (R)", "Pause loop (L)"):
            assert words in titles, words
        await pilot.press("question_mark")
        await wait_for(lambda: isinstance(app.screen, HelpScreen), "help")
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(app.screen.query(Static)[1].content)
        help_text = console.export_text()
        for words in ("Approve", "Reject", "Pause loop"):
            assert words in help_text, words
        await pilot.press("escape")
        approve = next(c for c in app.get_system_commands(app.screen) if c.title.startswith("Approve"))
        approve.callback()
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "palette asks to confirm")
        await pilot.press("y")
        await wait_for(lambda: not table(app).tasks[task_id].awaiting_approval, "approved from the palette")


# --- the budget line on the costs screen -------------------------------------------------------


async def _spend(db: Store, usd: float, subject: str) -> None:
    await add(db, subject, priority=5)
    claim = await db.claim_next(worker="d", lease_ms=60_000)
    assert claim is not None
    await db.record(claim, Outcome(OutcomeKind.SUCCESS, cost_usd=usd), worker="d")


def _budget(app: VigilApp) -> str:
    screen = app.screen
    assert isinstance(screen, CostsScreen)
    return str(screen.query_one("#budget").render())


async def test_costs_screen_shows_spend_against_the_daily_budget(home: Path, db: Store, clock: ManualClock) -> None:
    with (home / "vigil.toml").open("a") as toml:
        toml.write("\n[budget]\ndaily_usd = 2.0\nurgent_priority = 2\n")
    settings = load_settings(home)
    await _spend(db, 1.5, "first run")
    app = VigilApp(settings, opener=lambda: open_store(settings, clock), clock=clock, probe_interval_s=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "queue")
        await pilot.press("5")
        await wait_for(lambda: isinstance(app.screen, CostsScreen) and app.screen.loads >= 1, "costs")
        line = _budget(app)
        assert "budget: $1.50 of $2.00 in the last 24 h" in line
        assert "75%" in line
        assert "under the cap: every task runs" in line
        await _spend(db, 1.0, "second run")  # another process records more spend: over the cap
        await wait_for(lambda: "$2.50 of $2.00" in _budget(app), "live update")
        line = _budget(app)
        assert "125%" in line
        assert "only urgent tasks run (priority ≤ 2)" in line
        clock.advance(25 * 3_600_000)  # the spend leaves the rolling 24 h window
        await pilot.press("right_square_bracket")  # any reload reads the budget afresh
        await wait_for(lambda: "$0.00 of $2.00" in _budget(app), "window moved on")
        assert "under the cap" in _budget(app)


async def test_costs_screen_says_quietly_when_no_budget_is_set(make_app: AppFactory, db: Store) -> None:
    await _spend(db, 0.25, "cheap run")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "queue")
        await pilot.press("5")
        await wait_for(lambda: isinstance(app.screen, CostsScreen) and app.screen.loads >= 1, "costs")
        line = _budget(app)
        assert "budget: $0.25 spent in the last 24 h (no cap)" in line
        assert "[budget] daily_usd is not set" in line
        assert "\n" not in line.strip()
