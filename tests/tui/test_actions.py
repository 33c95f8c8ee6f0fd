"""Every write action from the queue screen, on real SQLite, including the
conflicts where another process changes the task between highlight and keypress."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import notes, queue, shown_ids, table
from tui.dialogs import ConfirmDialog
from tui.forms import DeferForm, NewTaskForm
from tui.loaders import RECENT_MS
from vigil.clock import ManualClock
from vigil.config import Settings
from vigil.models import TaskStatus
from vigil.store import Store

pytestmark = pytest.mark.slow


async def test_plus_makes_more_urgent_and_minus_less(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "steer me", priority=5)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("plus")
        await wait_for(lambda: table(app).tasks[task_id].priority == 4, "priority 4 on screen")
        assert (await db.get_task(task_id)).priority == 4
        await pilot.press("minus", "minus")
        await wait_for(lambda: table(app).tasks[task_id].priority == 6, "priority 6 on screen")
        assert (await db.get_task(task_id)).priority == 6
        events = [(e.kind, e.from_value, e.to_value) for e in await db.list_events(task_id)]
        assert ("priority", "5", "4") in events


async def test_raise_refused_when_the_dispatcher_claimed_the_task_first(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "about to run", priority=5)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("p")  # freeze the screen: the app still shows the task pending
        claim = await db.claim_next(worker="dispatcher-1", lease_ms=60_000)
        assert claim is not None
        assert claim.task.id == task_id
        assert table(app).tasks[task_id].status is TaskStatus.PENDING
        await pilot.press("plus")
        await wait_for(lambda: any("already started" in n for n in notes(app)), "refusal shown")
        assert f"#{task_id} already started, not raised" in notes(app)
        task = await db.get_task(task_id)
        assert (task.status, task.priority) == (TaskStatus.ACTIVE, 5)


async def test_defer_refused_when_the_task_started_meanwhile(
    make_app: AppFactory, db: Store, clock: ManualClock
) -> None:
    task_id = await add(db, "defer me")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("p")
        await db.claim_next(worker="dispatcher-1", lease_ms=60_000)
        await pilot.press("d")
        await wait_for(lambda: isinstance(app.screen, DeferForm), "defer form")
        await pilot.click("#preset-1h")
        await wait_for(lambda: f"#{task_id} already started, not deferred" in notes(app), "refusal")
        task = await db.get_task(task_id)
        assert task.scheduled_for <= clock.now_ms()


async def test_defer_with_preset_and_with_typed_time(make_app: AppFactory, db: Store, clock: ManualClock) -> None:
    a = await add(db, "a")
    b = await add(db, "b")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 2, "rows")
        await pilot.press("d")
        await wait_for(lambda: isinstance(app.screen, DeferForm), "defer form")
        await pilot.click("#preset-4h")
        await wait_for(lambda: table(app).tasks[a].scheduled_for == clock.now_ms() + 4 * 3_600_000, "a deferred")
        assert (await db.get_task(a)).scheduled_for == clock.now_ms() + 4 * 3_600_000
        await wait_for(lambda: table(app).current_id == a, "cursor stays on a")
        await pilot.press("up")  # b is first now (a moved to the later ones)
        assert table(app).current_id == b
        await pilot.press("d")
        await wait_for(lambda: isinstance(app.screen, DeferForm), "defer form")
        await pilot.click("#when")  # the first preset has the focus; the time is typed in the box
        await pilot.press(*"soon")
        await pilot.press("enter")
        assert isinstance(app.screen, DeferForm)  # bad text: the form stays open with an error
        await pilot.press(*["backspace"] * 4, *"90m", "enter")
        await wait_for(lambda: table(app).tasks[b].scheduled_for == clock.now_ms() + 90 * 60_000, "b deferred")


async def test_cancel_asks_first_and_no_keeps_the_task(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "maybe cancel")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("x")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "confirmation")
        await pilot.press("n")
        await wait_for(lambda: app.screen is queue(app), "back on the queue")
        assert (await db.get_task(task_id)).status is TaskStatus.PENDING
        await pilot.press("x")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "confirmation")
        await pilot.press("y")
        await wait_for(lambda: shown_ids(app) == [], "canceled task leaves the queue")
        assert (await db.get_task(task_id)).status is TaskStatus.CANCELED


async def test_cancel_of_a_running_task_requests_it(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "running")
    await db.claim_next(worker="dispatcher-1", lease_ms=60_000)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("x")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "confirmation")
        await pilot.press("y")
        await wait_for(lambda: f"#{task_id} is running: cancel requested" in notes(app), "request noted")
        task = await db.get_task(task_id)
        assert (task.status, task.cancel_requested) == (TaskStatus.ACTIVE, True)


async def test_retry_of_a_failed_task_from_the_failed_filter(
    make_app: AppFactory, db: Store, clock: ManualClock
) -> None:
    task_id = await add(db, "will fail")
    await db.close_task(task_id, TaskStatus.FAILED, "broke", actor="agent")
    clock.advance(RECENT_MS + 60_000)  # failed a while ago: no longer kept in the live table
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "first load")
        assert shown_ids(app) == []
        await pilot.press("F")  # the "failed" count's key
        await wait_for(lambda: shown_ids(app) == [task_id], "failed task listed")
        await pilot.press("r")
        await wait_for(lambda: f"#{task_id} pending again" in notes(app), "retried")
        assert (await db.get_task(task_id)).status is TaskStatus.PENDING


async def test_retry_refused_when_someone_retried_it_first(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "failed")
    await db.close_task(task_id, TaskStatus.FAILED, "broke", actor="agent")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("F")
        await wait_for(lambda: shown_ids(app) == [task_id], "failed task listed")
        await pilot.press("p")
        await db.retry(task_id, actor="human")
        await pilot.press("r")
        await wait_for(lambda: f"#{task_id} still pending, not retried" in notes(app), "refusal")


async def test_new_task_form_validates_then_adds(
    make_app: AppFactory, db: Store, clock: ManualClock, settings: Settings
) -> None:
    for name in ("web", "git"):  # a task's skills must exist in the home
        (settings.skills_dir / name).mkdir(parents=True)
        (settings.skills_dir / name / "SKILL.md").write_text(f"---\ndescription: {name}\n---\n{name}\n")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "first load")
        await pilot.press("n")
        await wait_for(lambda: isinstance(app.screen, NewTaskForm), "form")
        form = app.screen
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, NewTaskForm)  # empty subject refused, form still open
        assert "subject must not be empty" in str(form.query_one("#error").render())
        form.query_one("#subject", Input).value = "write the [bold]report[/]"
        form.query_one("#priority", Input).value = "12"
        await pilot.press("ctrl+s")
        assert "priority must be 1-9" in str(form.query_one("#error").render())
        form.query_one("#priority", Input).value = "2"
        form.query_one("#skills", Input).value = "web, git"
        form.query_one("#due", Input).value = "2h"
        form.query_one("#key", Input).value = "report-1"
        await pilot.press("ctrl+s")
        await wait_for(lambda: len(shown_ids(app)) == 1, "new row")
        task = await db.get_task(shown_ids(app)[0])
        assert (task.subject, task.priority, task.skills) == ("write the [bold]report[/]", 2, ("web", "git"))
        assert (task.source, task.source_key) == ("human", "report-1")
        assert task.scheduled_for == clock.now_ms() + 2 * 3_600_000
        assert table(app).current_id == task.id  # the new task is highlighted


async def test_bulk_cancel_of_marked_rows_previews_then_applies(make_app: AppFactory, db: Store) -> None:
    ids = [await add(db, f"t{i}") for i in range(4)]
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 4, "rows")
        await pilot.press("space", "down", "space")  # marks ids[0] and ids[2]
        assert table(app).marks == {ids[0], ids[2]}
        await pilot.press("x")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "preview")
        shown = "\n".join(str(w.render()) for w in app.screen.query("Static"))
        assert "2 tasks" in shown
        assert f"#{ids[0]}" in shown
        assert f"#{ids[2]}" in shown
        assert f"#{ids[1]}" not in shown
        await pilot.press("y")
        await wait_for(lambda: shown_ids(app) == [ids[1], ids[3]], "two canceled")
        assert table(app).marks == set()
        statuses = [(await db.get_task(i)).status for i in ids]
        assert statuses == [TaskStatus.CANCELED, TaskStatus.PENDING, TaskStatus.CANCELED, TaskStatus.PENDING]


async def test_bulk_raise_reports_each_refusal(make_app: AppFactory, db: Store) -> None:
    a = await add(db, "a")
    b = await add(db, "b")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 2, "rows")
        await pilot.press("space", "space", "p")
        await db.claim_next(worker="d", lease_ms=60_000)  # takes a
        await pilot.press("plus")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "preview")
        await pilot.press("y")
        await wait_for(lambda: any("1 of 2 done" in n for n in notes(app)), "summary")
        assert any(f"#{a} already started, not raised" in n for n in notes(app))
        assert (await db.get_task(b)).priority == 4


async def test_freeze_shows_badge_and_counts_waiting_changes(make_app: AppFactory, db: Store) -> None:
    await add(db, "first")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 1, "row")
        await pilot.press("p")
        header = str(app.screen.query_one("#badges").render())
        assert "FROZEN" in header
        await add(db, "second")
        await wait_for(lambda: queue(app).changes_waiting >= 1, "change counted")
        assert len(shown_ids(app)) == 1
        waiting = queue(app).changes_waiting  # "1 change", "2 changes": counted in words
        assert f"{waiting} change{'' if waiting == 1 else 's'} waiting" in str(app.screen.query_one("#badges").render())
        await pilot.press("p")
        await wait_for(lambda: len(shown_ids(app)) == 2, "resumed and loaded")
        assert "FROZEN" not in str(app.screen.query_one("#badges").render())


async def test_follow_moves_the_cursor_to_the_active_task(make_app: AppFactory, db: Store) -> None:
    await add(db, "one")
    two = await add(db, "two")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 2, "rows")
        assert table(app).cursor_row == 0
        await pilot.press("f")
        await db.set_priority(two, 1, actor="human")
        await db.claim_next(worker="d", lease_ms=60_000)
        await wait_for(lambda: table(app).tasks[two].status is TaskStatus.ACTIVE, "two active")
        assert table(app).current_id == two


async def test_readonly_hides_every_write(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "look only", priority=5)
    app = make_app(readonly=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("plus", "minus", "d", "x", "r", "n")
        assert app.screen is queue(app)
        shown_keys = {b.action for _, b, enabled, _ in app.screen.active_bindings.values() if enabled}
        for action in ("new_task", "raise", "lower", "defer", "cancel", "retry"):
            assert action not in shown_keys
        task = await db.get_task(task_id)
        assert (task.priority, task.status, task.updated_at) == (5, TaskStatus.PENDING, task.created_at)


async def test_keys_that_do_not_apply_are_dimmed(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "pending")
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        state = {b.action: enabled for _, b, enabled, _ in app.screen.active_bindings.values()}
        assert state["raise"] is True
        assert state["retry"] is False  # a pending task cannot be retried: shown dimmed


async def test_clicking_a_status_count_filters_by_it(make_app: AppFactory, db: Store, clock: ManualClock) -> None:
    await add(db, "pending one")
    failed = await add(db, "failed one")
    await db.close_task(failed, TaskStatus.FAILED, "no", actor="agent")
    clock.advance(RECENT_MS + 60_000)  # failed a while ago: no longer kept in the live table
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 1, "pending row")
        counts = queue(app).query_one("#counts")
        await wait_for(lambda: "Failed 1" in str(counts.render()), "the counts of the loaded snapshot")
        # The header's lines settle (a gate line may appear above the counts) before
        # the click is aimed: a click aimed at a moving line lands on its neighbour.
        await pilot.pause()
        column = str(counts.render()).index("Failed")
        assert await pilot.click(counts, offset=(column + 2, 0))
        await wait_for(lambda: shown_ids(app) == [failed], "only the failed task")
        assert queue(app).filter.text == "status:failed"
        await pilot.pause()
        assert await pilot.click(counts, offset=(column + 2, 0))
        await wait_for(lambda: len(shown_ids(app)) == 1 and shown_ids(app) != [failed], "filter cleared")
