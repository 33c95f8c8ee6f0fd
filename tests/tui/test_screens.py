"""The other screens: task, history (keyset paging, search), sensors, costs, help
and the command palette, each on real SQLite."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text
from textual.dom import DOMNode
from textual.widgets import DataTable, Static

from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import notes, queue, shown_ids, table
from tui.app import VigilApp
from tui.costs_screen import CostsScreen
from tui.dialogs import HelpScreen
from tui.history_screen import HistoryScreen
from tui.loaders import HISTORY_PAGE
from tui.sensors_screen import SensorsScreen
from tui.task_screen import TaskScreen
from vigil.clock import ManualClock, SystemClock
from vigil.config import load_settings
from vigil.models import NewTask, Outcome, OutcomeKind, SensorRun, SensorSkip, TaskStatus
from vigil.store import Store, open_store

pytestmark = pytest.mark.slow


def rendered(screen: DOMNode, selector: str) -> str:
    widget = screen.query_one(selector)
    visual = widget.render()
    return str(getattr(visual, "_text", None) or visual)


async def test_task_screen_shows_runs_notes_events_and_markdown(
    make_app: AppFactory, db: Store, clock: ManualClock, tmp_path: Path
) -> None:
    task_id = await add(db, "investigate", description="# Heading\n\n* point [/]")
    claim = await db.claim_next(worker="d", lease_ms=60_000)
    assert claim is not None
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"type":"system"}\n{"type":"assistant","text":"working on it"}\n')
    await db.add_note(task_id, "halfway there", author="agent")
    clock.advance(90_000)
    outcome = Outcome(
        OutcomeKind.FAILED,
        summary="gave up",
        error="tool crashed",
        cost_usd=0.25,
        model="m-1",
        transcript_path=str(transcript),
    )
    await db.record(claim, outcome, worker="d")
    app = make_app()
    async with app.run_test(size=(120, 50)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "queue loaded")
        await pilot.press("F")
        await wait_for(lambda: shown_ids(app) == [task_id], "failed task listed")
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
        screen = app.screen
        assert isinstance(screen, TaskScreen)
        assert "investigate" in rendered(screen, "#title")
        assert screen.detail is not None
        assert [r.outcome for r in screen.detail.runs] == ["failed"]
        assert [n.text for n in screen.detail.notes] == ["halfway there"]
        assert [e.kind for e in screen.detail.events][:2] == ["created", "status"]
        shown = Console(width=80, record=True, file=io.StringIO())
        shown.print(screen.query_one("#description", Static).content)
        text = shown.export_text()
        assert "Heading" in text  # rendered as Markdown: the heading without its #,
        assert "# Heading" not in text
        assert "• point [/]" in text  # a bullet, and [/] as text
        await pilot.press("escape")
        await wait_for(lambda: app.screen is queue(app), "back")


async def test_task_screen_tails_the_running_transcript(make_app: AppFactory, db: Store, home: Path) -> None:
    task_id = await add(db, "running")
    claim = await db.claim_next(worker="d", lease_ms=60_000)
    assert claim is not None
    transcript = home / "logs" / "runs" / f"{task_id}-{claim.attempt}.jsonl"  # where the dispatcher writes it
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_text("line one\n")
    app = make_app()
    async with app.run_test(size=(120, 50)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
        screen = app.screen
        await wait_for(lambda: "line one" in rendered(screen, "#transcript"), "transcript shown")
        with transcript.open("a") as handle:
            handle.write("line two\n")
        await wait_for(lambda: "line two" in rendered(screen, "#transcript"), "new line tailed")


async def test_history_pages_with_keyset_and_searches(make_app: AppFactory, db: Store) -> None:
    news = [NewTask(f"job {i}" + (" needle" if i % 50 == 0 else "")) for i in range(HISTORY_PAGE + 30)]
    created = (await db.add_tasks(news, actor="human")).created_ids
    for task_id in created:
        await db.cancel(task_id, actor="human")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "queue")
        await pilot.press("3")
        await wait_for(lambda: isinstance(app.screen, HistoryScreen) and len(app.screen.rows) > 0, "history")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        assert [t.id for t in screen.rows] == sorted(created, reverse=True)[:HISTORY_PAGE]
        await pilot.press("m")
        await wait_for(lambda: len(screen.rows) == len(created), "second page")
        assert [t.id for t in screen.rows] == sorted(created, reverse=True)
        assert screen.exhausted
        await pilot.press("slash", *"needle", "enter")
        await wait_for(lambda: len(screen.rows) == 3, "search results")
        assert all("needle" in t.subject for t in screen.rows)
        await pilot.press("escape")
        await wait_for(lambda: len(screen.rows) == HISTORY_PAGE, "search cleared")


async def test_history_retry_and_open(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "failed one")
    await db.close_task(task_id, TaskStatus.FAILED, "no", actor="agent")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("3")
        await wait_for(lambda: isinstance(app.screen, HistoryScreen) and app.screen.rows, "history")
        await pilot.press("r")
        await wait_for(lambda: f"#{task_id} pending again" in notes(app), "retried")
        assert (await db.get_task(task_id)).status is TaskStatus.PENDING


async def test_sensors_screen_shows_state_highlights_stale_and_toggles(
    make_app: AppFactory, db: Store, clock: ManualClock
) -> None:
    now = clock.now_ms()
    await db.record_sensor_run("inbox", SensorRun(now - 60_000, 120, "ok", next_due_at=now + 60_000), [], None)
    await db.record_sensor_run(
        "feeds",
        SensorRun(now - 3_600_000, 50, "error", error="HTTP 500", next_due_at=now - 1_800_000, consecutive_failures=3),
        [],
        None,
    )
    await db.record_sensor_skip("feeds", SensorSkip("backoff", now - 1_800_000, now - 600_000, 3))
    await db.record_sensor_run("removed", SensorRun(now - 60_000, 1, "ok"), [], None)  # no longer configured
    app = make_app(sensors=({"use": "inbox"}, {"name": "feeds", "use": "feed"}))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("4")
        await wait_for(lambda: isinstance(app.screen, SensorsScreen) and app.screen.states, "sensors")
        screen = app.screen
        assert isinstance(screen, SensorsScreen)
        grid = screen.query_one(DataTable)
        assert [s.name for s in screen.states] == ["feeds", "inbox"]
        feeds_name = grid.get_cell("feeds", "name")
        assert isinstance(feeds_name, Text)
        assert "red" in str(feeds_name.style)  # stale: overdue and failing
        assert "red" not in str(grid.get_cell("inbox", "name").style)
        assert grid.get_cell("feeds", "last error").plain == "HTTP 500"
        assert (grid.get_cell("feeds", "skipped").plain, grid.get_cell("inbox", "skipped").plain) == ("3 backoff", "—")
        assert grid.get_cell("feeds", "next due").plain != "disabled"
        await pilot.press("e")
        await wait_for(lambda: not screen.states[0].enabled, "feeds disabled on screen")
        assert {s.name: s.enabled for s in await db.sensor_states()} == {"feeds": False, "inbox": True, "removed": True}
        assert grid.get_cell("feeds", "next due").plain == "disabled"  # not a time it will not run at


async def test_sensor_run_now_reports_the_command_result(make_app: AppFactory, db: Store, clock: ManualClock) -> None:
    await db.record_sensor_run("nosuch", SensorRun(clock.now_ms(), 1, "ok"), [], None)
    app = make_app(sensors=({"name": "nosuch", "use": "queue_health"},))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("4")
        await wait_for(lambda: isinstance(app.screen, SensorsScreen) and app.screen.states, "sensors")
        await pilot.press("r")
        await wait_for(lambda: any(n.startswith("sensor nosuch") and "…" not in n for n in notes(app)), "result")


async def test_costs_screen_groups_spend(make_app: AppFactory, db: Store) -> None:
    await add(db, "costly", skills=("web",))
    claim = await db.claim_next(worker="d", lease_ms=60_000)
    assert claim is not None
    outcome = Outcome(OutcomeKind.SUCCESS, cost_usd=1.5, tokens_in=1000, tokens_out=500, model="model-x")
    await db.record(claim, outcome, worker="d")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "queue")
        assert "$1.50" in rendered(queue(app), "#spend")
        await pilot.press("5")
        await wait_for(lambda: isinstance(app.screen, CostsScreen) and app.screen.loads >= 1, "costs")
        screen = app.screen
        assert isinstance(screen, CostsScreen)
        assert "$1.50" in rendered(screen, "#summary")
        assert "1.5k tokens" in rendered(screen, "#summary")
        await pilot.press("right_square_bracket")
        await wait_for(lambda: screen.days == 30 and screen.loads >= 2, "longer window")


async def test_help_lists_keys_and_palette_offers_actions(make_app: AppFactory, db: Store) -> None:
    await add(db, "x")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 1, "row")
        await pilot.press("question_mark")
        await wait_for(lambda: isinstance(app.screen, HelpScreen), "help")
        await pilot.press("escape")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for words in ("New", "Raise", "Lower", "Defer", "Cancel", "Mark", "Filter", "Freeze"):
            assert any(t.startswith(words) for t in titles), words
        raise_cmd = next(c for c in app.get_system_commands(app.screen) if c.title.startswith("Raise"))
        raise_cmd.callback()
        await wait_for(lambda: table(app).tasks[shown_ids(app)[0]].priority == 4, "palette ran +")


async def test_sensors_screen_lists_configured_sensors_that_never_ran(home: Path) -> None:
    with (home / "vigil.toml").open("a") as toml:
        toml.write('\n[[sensors]]\nuse = "inbox"\nevery = "5m"\n')
        toml.write('\n[[sensors]]\nuse = "my_sensors.py:watch"\nname = "watcher"\ncron = "0 9 * * 1-5"\n')
    settings = load_settings(home)  # re-read: the fixtures' settings predate the new entries
    app = VigilApp(settings, opener=lambda: open_store(settings), clock=SystemClock(), probe_interval_s=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("4")
        await wait_for(lambda: isinstance(app.screen, SensorsScreen) and app.screen.states, "sensors")
        screen = app.screen
        assert isinstance(screen, SensorsScreen)
        grid = screen.query_one(DataTable)
        assert [s.name for s in screen.states] == ["inbox", "watcher"]
        assert grid.get_cell("inbox", "schedule").plain == "every 5m"
        assert grid.get_cell("watcher", "schedule").plain == "cron 0 9 * * 1-5"
        assert grid.get_cell("watcher", "last run").plain == "never"


async def test_number_keys_switch_screens_and_ctrl_q_quits(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "open me")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("2")
        await wait_for(lambda: isinstance(app.screen, TaskScreen), "task screen of the highlighted task")
        assert isinstance(app.screen, TaskScreen)
        assert app.screen.task_id == task_id
        await pilot.press("4")
        await wait_for(lambda: isinstance(app.screen, SensorsScreen), "sensors")
        await pilot.press("1")
        await wait_for(lambda: app.screen is queue(app), "queue again")
        assert len(app.screen_stack) == 2  # the task screen was closed, not left below
        await pilot.press("ctrl+q")
        await wait_for(lambda: not app.is_running, "quit")
    assert app.return_value == ""


async def test_readonly_hides_writes_on_history_and_sensors(
    make_app: AppFactory, db: Store, clock: ManualClock
) -> None:
    failed = await add(db, "failed")
    await db.close_task(failed, TaskStatus.FAILED, "no", actor="agent")
    await db.record_sensor_run("inbox", SensorRun(clock.now_ms(), 1, "ok"), [], None)
    app = make_app(readonly=True, sensors=({"use": "inbox"},))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("3")
        await wait_for(lambda: isinstance(app.screen, HistoryScreen) and app.screen.rows, "history")
        await pilot.press("r")
        shown = {b.action for _, b, enabled, _ in app.screen.active_bindings.values() if enabled}
        assert "retry" not in shown
        await pilot.press("4")
        await wait_for(lambda: isinstance(app.screen, SensorsScreen) and app.screen.states, "sensors")
        await pilot.press("e", "r")
        shown = {b.action for _, b, enabled, _ in app.screen.active_bindings.values() if enabled}
        assert not shown & {"run_now", "toggle_enabled"}
    assert (await db.get_task(failed)).status is TaskStatus.FAILED
    assert [s.enabled for s in await db.sensor_states()] == [True]


async def test_task_screen_steers_the_open_task_and_reports_conflicts(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "steer from the task screen", priority=5)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
        screen = app.screen
        assert isinstance(screen, TaskScreen)
        await pilot.press("plus")
        await wait_for(lambda: screen.detail is not None and screen.detail.task.priority == 4, "raised on screen")
        assert (await db.get_task(task_id)).priority == 4
        await pilot.press("x")
        await wait_for(lambda: app.screen.__class__.__name__ == "ConfirmDialog", "confirmation")
        await db.claim_next(worker="d", lease_ms=60_000)  # the dispatcher takes it meanwhile
        await pilot.press("y")
        await wait_for(lambda: f"#{task_id} is running: cancel requested" in notes(app), "cancel request")
        task = await db.get_task(task_id)
        assert (task.status, task.cancel_requested) == (TaskStatus.ACTIVE, True)
        await wait_for(lambda: screen.detail is not None and screen.detail.task.cancel_requested, "shown")
        state = {b.action: enabled for _, b, enabled, _ in screen.active_bindings.values()}
        assert state["cancel"] is False  # already requested: dimmed
        assert state["defer"] is False  # running: cannot be deferred
