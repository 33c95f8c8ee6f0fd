"""What a new user tripped over: habits the dashboard keeps now (q quits, Enter
confirms and Escape cancels alike, fast typing lands in its box), and what it no
longer says wrong (deferrals from the due time, times one way, whole ids in the
history, the finish order, approval as its own state, a read-only empty queue)."""

from __future__ import annotations

import re
from pathlib import Path

from textual import events
from textual.containers import Vertical
from textual.widgets import DataTable, Input, Label, Static

from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import notes, queue, shown_ids, table
from tui.app import VigilApp
from tui.detail import DetailPane, status_text
from tui.dialogs import ConfirmDialog
from tui.forms import DeferForm, NewTaskForm, ReasonForm
from tui.history_screen import HistoryScreen
from tui.sensors_screen import SensorsScreen
from tui.task_screen import TaskScreen
from tui.times import relative, span
from vigil.clock import ManualClock
from vigil.config import Settings, load_settings
from vigil.gate import read_gate
from vigil.models import TaskStatus
from vigil.store import Store, open_store

HOUR = 3_600_000


def plain(widget: Static) -> str:
    return str(widget.render())


async def test_q_quits_and_ctrl_c_too(make_app: AppFactory, db: Store) -> None:
    for key in ("q", "ctrl+c"):
        app = make_app()
        async with app.run_test(size=(100, 24)) as pilot:
            await wait_for(lambda: queue(app).loads >= 1, "loaded")  # noqa: B023
            await pilot.press(key)
            await wait_for(lambda: not app.is_running, f"{key} quits")  # noqa: B023
        assert app.return_value == ""


async def test_q_in_the_filter_box_is_a_letter(make_app: AppFactory, db: Store) -> None:
    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "loaded")
        await pilot.press("slash", *"queue n")
        assert app.is_running
        assert queue(app).query_one("#filter", Input).value == "queue n"
        assert not isinstance(app.screen, NewTaskForm)


async def test_enter_confirms_and_escape_cancels_in_every_dialog(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "to cancel")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("L")  # pause: a reason form, Enter pauses
        await wait_for(lambda: isinstance(app.screen, ReasonForm), "pause form")
        await pilot.press(*"maintenance", "enter")
        await wait_for(lambda: "loop paused: maintenance" in " ".join(notes(app)), "paused by Enter")
        await pilot.press("L")  # resume: a confirmation, Enter resumes (it silently canceled before)
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "resume confirmation")
        await pilot.press("enter")
        await wait_for(lambda: any(n.startswith("loop resumed") for n in notes(app)), "resumed by Enter")
        assert (await read_gate(db)).state == "running"
        for dialog, key in ((ConfirmDialog, "x"), (DeferForm, "d"), (ReasonForm, "L")):
            await pilot.press(key)
            await wait_for(lambda: isinstance(app.screen, dialog), f"{dialog.__name__}")  # noqa: B023
            await pilot.press("escape")
            await wait_for(lambda: not isinstance(app.screen, dialog), "escape cancels")  # noqa: B023
        assert (await db.get_task(task_id)).status is TaskStatus.PENDING
        assert (await read_gate(db)).state == "running"
        await pilot.press("x", "enter")  # the cancel confirmation: Enter is yes
        await wait_for(lambda: f"#{task_id} canceled" in notes(app), "canceled by Enter")


async def test_fast_typing_in_the_new_task_form_lands_in_its_box(make_app: AppFactory, db: Store) -> None:
    """The keys come faster than the screens handle them: n, then the subject, tab,
    the description, all queued before the form has even opened."""
    app = make_app()
    async with app.run_test(size=(100, 40)):
        await wait_for(lambda: queue(app).loads >= 1, "loaded")
        for key in ("n", *"deploy the site", "tab", *"all of it", "tab", "2"):  # 2 replaces the 5 it selects
            app.post_message(events.Key(key, key if len(key) == 1 else None))
        await wait_for(lambda: isinstance(app.screen, NewTaskForm), "the form")
        form = app.screen
        await wait_for(lambda: form.query_one("#priority", Input).value == "2", "every key handled")
        values = {box.id: box.value for box in form.query(Input)}
        assert (values["subject"], values["description"]) == ("deploy the site", "all of it")
        assert queue(app).sort_by is None  # no key reached the queue ("s" sorts there)


async def test_defer_presets_count_from_the_due_time(make_app: AppFactory, db: Store, clock: ManualClock) -> None:
    later = await add(db, "due in 1h58m", scheduled_for=clock.now_ms() + HOUR + 58 * 60_000)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [later], "row")
        await pilot.press("d")
        await wait_for(lambda: isinstance(app.screen, DeferForm), "defer dialog")
        assert "due in 1h58m" in " ".join(plain(s) for s in app.screen.query(Static))
        await pilot.press("enter")  # the first preset: an hour later than it is due
        due = clock.now_ms() + 2 * HOUR + 58 * 60_000
        await wait_for(lambda: table(app).tasks[later].scheduled_for == due, "deferred from its due time")
        said = next(n for n in notes(app) if n.startswith(f"#{later} deferred"))
        assert re.fullmatch(
            rf"#{later} deferred by 1 hour: due \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d \w+ \(in 2h58m\)", said
        )
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
        events_text = plain(app.screen.query_one("#events", Static))
        assert "scheduled" in events_text
        assert not re.search(r"\d{13}", events_text)  # never epoch milliseconds


async def test_approval_and_review_are_their_own_markers_filters_and_words(make_app: AppFactory, db: Store) -> None:
    plain_blocked = await add(db, "stuck")
    await db.close_task(plain_blocked, TaskStatus.BLOCKED, "waits on a person", actor="agent")
    asks = await add(db, "rotate the keys", requires_approval=True)
    ran = await add(db, "a result to check")
    held = "UPDATE tasks SET status = 'blocked', review = 'pending' WHERE id = ?"
    await db._db.write(lambda c: c.execute(held, (ran,)))  # type: ignore[attr-defined]
    app = make_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(lambda: set(shown_ids(app)) == {plain_blocked, asks, ran}, "rows")
        assert table(app).get_cell(str(asks), "status").plain == "approval"
        assert table(app).get_cell(str(asks), "next").plain == "?"
        assert table(app).get_cell(str(ran), "status").plain == "review"
        assert table(app).get_cell(str(ran), "next").plain == "!"
        assert table(app).get_cell(str(plain_blocked), "status").plain == "blocked"
        await pilot.press("E")
        await wait_for(lambda: shown_ids(app) == [ran], "E: awaiting review only")
        await pilot.press("E")
        await pilot.press("slash", *"status:approval", "enter")
        await wait_for(lambda: shown_ids(app) == [asks], "status:approval")
        pane = queue(app).query_one(DetailPane)
        await wait_for(lambda: pane.shown is not None and pane.shown.id == asks, "in the detail pane")
        assert pane.shown is not None
        assert status_text(pane.shown).plain == "blocked, awaiting approval"


async def test_history_in_finish_order_whole_ids_search_as_you_type(
    make_app: AppFactory, db: Store, clock: ManualClock, settings: Settings
) -> None:
    await db._db.write(lambda c: c.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('tasks', 2796)"))  # type: ignore[attr-defined]
    ids = [await add(db, f"job {n}") for n in range(3)]  # 2797, 2798, 2799
    for task_id in (ids[2], ids[0], ids[1]):  # finished out of id order
        clock.advance(60_000)
        await db.close_task(task_id, TaskStatus.COMPLETED, f"result of {task_id}", actor="agent")
    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.press("3")
        await wait_for(lambda: isinstance(app.screen, HistoryScreen) and len(app.screen.rows) == 3, "history")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        assert [t.id for t in screen.rows] == [ids[1], ids[0], ids[2]]  # the latest finish first
        grid = screen.query_one("#history", DataTable)
        assert [grid.get_cell(str(i), "id").plain for i in (ids[1], ids[0], ids[2])] == ["2798", "2797", "2799"]
        assert dict((k, w) for k, _, w in screen._layout)["id"] >= 4  # the column holds them whole
        await pilot.press("slash", *"of 2799")  # no Enter: it searches as you type
        await wait_for(lambda: [t.id for t in screen.rows] == [ids[2]], "found as typed")


async def test_a_read_only_empty_queue_does_not_say_press_n(make_app: AppFactory, db: Store) -> None:
    app = make_app(readonly=True)
    async with app.run_test(size=(100, 24)):
        await wait_for(lambda: queue(app).loads >= 1, "loaded")
        empty = plain(queue(app).query_one("#empty", Static))
        assert "Press n" not in empty
        assert "vigil task add adds a task" in empty


async def test_the_sensors_screen_names_a_built_in_sensors_own_schedule(home: Path, clock: ManualClock) -> None:
    with (home / "vigil.toml").open("a") as toml:
        toml.write('\n[[sensors]]\nuse = "inbox"\npath = "inbox"\n\n[[sensors]]\nuse = "queue_health"\n')
    settings = load_settings(home)
    app = VigilApp(settings, opener=lambda: open_store(settings, clock), clock=clock, probe_interval_s=0.05)
    async with app.run_test(size=(120, 24)) as pilot:
        await pilot.press("4")
        await wait_for(lambda: isinstance(app.screen, SensorsScreen) and app.screen.loads >= 1, "sensors")
        grid = app.screen.query_one("#sensors", DataTable)
        schedules = [str(grid.get_cell(name, "schedule")) for name in ("inbox", "queue_health")]
        assert schedules == ["every 30s", "every 1m"]  # not "—": the built-ins' own


def test_times_are_written_one_way() -> None:
    assert [span(ms) for ms in (0, 59_999, 60_000, 3_599_999, 3_600_000 + 5 * 60_000, 2 * 86_400_000)] == [
        "<1m", "<1m", "1m", "59m", "1h05m", "2d00h",
    ]  # fmt: skip
    assert (relative(1_000 + 59_000, 1_000), relative(1_000, 1_000 + 59_000)) == ("in <1m", "<1m ago")


async def test_no_horizontal_scrollbar_at_80_or_60_columns(make_app: AppFactory, db: Store) -> None:
    for n in range(3):
        await add(db, f"task {n} with a subject long enough to need the room", source="sensor:github")
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 3, "rows")
        for width in (80, 60):
            await pilot.resize_terminal(width, 24)
            await pilot.pause()
            grid = table(app)
            if width >= 80:  # the supported size: every column fits
                assert grid.virtual_size.width <= grid.size.width
            assert not grid.show_horizontal_scrollbar, width  # below it, cut at the edge, no stray bar


async def test_dialog_hints_wrap_at_a_word_at_80_columns(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "later")
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("d")
        await wait_for(lambda: isinstance(app.screen, DeferForm), "defer dialog")
        await pilot.pause()
        label = app.screen.query_one(Label)
        assert label.size.width <= app.screen.query_one(Vertical).size.width
        assert label.size.height >= 2  # the long hint takes two lines rather than losing its end
