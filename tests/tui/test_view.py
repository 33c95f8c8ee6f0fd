"""How the queue view behaves: freezing, fitting the width, jumping, times."""

from __future__ import annotations

import io
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Button, DataTable, Input, Static
from textual.widgets.data_table import ColumnKey

import tui
from dispatch.attempt import transcript_path
from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import cell, queue, shown_ids, table
from tui.app import VigilApp
from tui.costs_screen import CostsScreen
from tui.detail import DetailPane
from tui.dialogs import ConfirmDialog, HelpScreen
from tui.forms import DeferForm, NewTaskForm
from tui.history_screen import HistoryScreen
from tui.keybar import KeyBar
from tui.live import LiveScreen
from tui.tabs import LoopLine, TabBar
from tui.task_screen import TaskScreen
from vigil.clock import ManualClock
from vigil.config import Settings, load_settings, settings_from_mapping
from vigil.errors import ConfigError
from vigil.models import GitHubLink, NewTask, Outcome, OutcomeKind, TaskStatus
from vigil.store import Store, open_store
from vigil.task_query import Sort


async def test_a_frozen_view_stays_frozen_through_dialogs_and_own_writes(make_app: AppFactory, db: Store) -> None:
    first = await add(db, "first")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [first], "row")
        counts = str(queue(app).query_one("#counts").render())
        await pilot.press("p")
        await add(db, "second")
        await wait_for(lambda: queue(app).changes_waiting >= 1, "counted")
        loads = queue(app).loads
        await pilot.press("question_mark")
        await wait_for(lambda: isinstance(app.screen, HelpScreen), "help")
        await pilot.press("escape")
        await pilot.press("d")
        await wait_for(lambda: isinstance(app.screen, DeferForm), "defer dialog")
        await pilot.press("escape")
        await pilot.press("plus")  # our own write: counted too, not loaded
        await wait_for(lambda: f"#{first} priority 5 → 4" in app.notices, "written")
        assert (await db.get_task(first)).priority == 4
        await pilot.pause(0.3)
        assert queue(app).loads == loads
        assert table(app).tasks[first].priority == 5
        assert shown_ids(app) == [first]
        assert str(queue(app).query_one("#counts").render()) == counts
        await pilot.press("p")
        await wait_for(lambda: len(shown_ids(app)) == 2, "thawed and caught up")
        assert table(app).tasks[first].priority == 4


async def test_columns_fit_the_width_and_shrink_again(make_app: AppFactory, db: Store) -> None:
    for n in range(3):
        await add(db, f"task {n} " + "with a long subject " * 8, source="sensor:github-notifications")
    app = make_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 3, "rows")
        grid = table(app)
        pane = queue(app).query_one(DetailPane)
        assert pane.display
        await pilot.pause()
        assert {"status", "source"} <= set(grid.column_keys)
        assert grid.virtual_size.width <= grid.size.width  # nothing behind a horizontal scrollbar
        wide = grid.columns[ColumnKey("subject")].width
        await pilot.resize_terminal(80, 24)
        await wait_for(lambda: not pane.display, "the pane goes when the table would not fit beside it")
        await pilot.pause()
        assert {"status", "source"} <= set(grid.column_keys)
        assert grid.virtual_size.width <= grid.size.width
        assert grid.columns[ColumnKey("subject")].width < wide
        assert cell(app, shown_ids(app)[0], "subject").startswith("task 0 with a long")


async def test_history_keeps_status_source_and_time_at_80_columns_and_shows_errors(
    make_app: AppFactory, db: Store
) -> None:
    failed = await add(db, "renew the certificate", source="sensor:certs")
    await db.close_task(failed, TaskStatus.FAILED, "permission denied", actor="agent")
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await wait_for(lambda: isinstance(app.screen, HistoryScreen) and bool(app.screen.rows), "history")
        grid = app.screen.query_one(DataTable)
        keys = [c.key.value for c in grid.ordered_columns]
        assert {"id", "status", "subject", "source", "finished"} <= set(keys)
        await pilot.resize_terminal(120, 24)
        await wait_for(lambda: "result" in [c.key.value for c in grid.ordered_columns], "room for the error")
        assert grid.get_cell(str(failed), "result").plain == "permission denied"


async def test_g_and_end_jump_to_the_last_row_and_home_and_g_to_the_first(make_app: AppFactory, db: Store) -> None:
    for n in range(30):
        await add(db, f"t{n}")
    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 30, "rows")
        for key, row in (("G", 29), ("g", 0), ("end", 29), ("home", 0)):
            await pilot.press(key)
            assert table(app).cursor_row == row, key


async def test_defer_starts_on_the_presets_and_says_what_it_accepts(
    make_app: AppFactory, db: Store, clock: ManualClock
) -> None:
    a = await add(db, "a")
    b = await add(db, "b")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [a, b], "rows")
        await pilot.press("d")
        await wait_for(lambda: isinstance(app.screen, DeferForm), "defer dialog")
        assert isinstance(app.screen.focused, Button)
        assert app.screen.focused.id == "preset-1h"
        await pilot.press("right", "enter")  # the second preset: 4 hours
        await wait_for(lambda: table(app).tasks[a].scheduled_for == clock.now_ms() + 4 * 3_600_000, "deferred 4h")
        await wait_for(lambda: table(app).current_id == a, "cursor stays on a")
        await pilot.press("up", "d")
        await wait_for(lambda: isinstance(app.screen, DeferForm), "defer dialog")
        form = app.screen
        await pilot.click("#when")
        await pilot.press("enter")  # nothing typed
        error = str(form.query_one("#error").render())
        assert "a duration from now (90s, 30m" in error
        assert "ISO 8601" in error
        await pilot.press(*"tomorrow", "enter")
        assert "invalid time 'tomorrow': expected a duration from now" in str(form.query_one("#error").render())
        assert app.screen is form


async def test_new_task_due_field_takes_what_the_cli_takes(make_app: AppFactory, db: Store) -> None:
    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "loaded")
        await pilot.press("n")
        await wait_for(lambda: isinstance(app.screen, NewTaskForm), "form")
        form = app.screen
        form.query_one("#subject", Input).value = "x"
        form.query_one("#due", Input).value = "tomorrow"
        await pilot.press("ctrl+s")
        assert "expected a duration from now (90s, 30m, 2h, 1d" in str(form.query_one("#error").render())
        form.query_one("#due", Input).value = "1d"
        await pilot.press("ctrl+s")
        await wait_for(lambda: len(shown_ids(app)) == 1, "added")


async def test_the_live_transcript_follows_new_output_and_dialogs_keep_the_place(
    make_app: AppFactory, db: Store, settings: Settings
) -> None:
    task_id = await add(db, "talks a lot")
    claim = await db.claim_next(worker="d", lease_ms=600_000)
    assert claim is not None
    path = transcript_path(settings, task_id, claim.attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"line {n}\n" for n in range(30)))
    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
        scroll = app.screen.query_one(VerticalScroll)
        await wait_for(lambda: "line 29" in str(app.screen.query_one("#transcript").render()), "transcript")
        await pilot.press("end")
        await wait_for(lambda: scroll.scroll_y == scroll.max_scroll_y > 0, "at the bottom")
        bottom = scroll.max_scroll_y
        with path.open("a") as out:
            out.write("".join(f"more {n}\n" for n in range(10)))
        await wait_for(lambda: "more 9" in str(app.screen.query_one("#transcript").render()), "new output shown")
        await pilot.pause(0.2)
        assert scroll.scroll_y == scroll.max_scroll_y  # still at the (new) bottom
        scroll.scroll_to(y=bottom // 2, animate=False, immediate=True)
        await pilot.pause()
        middle = scroll.scroll_y
        await pilot.press("x")
        await wait_for(lambda: isinstance(app.screen, ConfirmDialog), "cancel dialog")
        await pilot.press("n")
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 2, "back, reloaded")
        await pilot.pause(0.2)
        assert scroll.scroll_y == middle


async def test_times_are_local_and_z_switches_to_utc(home: Path, clock: ManualClock) -> None:
    with (home / "vigil.toml").open("a") as toml:
        toml.write('\n[tui]\ntimezone = "Asia/Tokyo"\n')
    settings = load_settings(home)
    clock.set(1_767_225_600_000 + 20 * 3_600_000)  # 2026-01-01T20:00Z, 05:00 on the 2nd in Tokyo
    store = await open_store(settings, clock)
    task_id = (await store.add_task(NewTask("when?"))).task_id
    await store.close()
    app = VigilApp(settings, opener=lambda: open_store(settings, clock), clock=clock, probe_interval_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
        fields = app.screen.query_one("#fields", Static)
        assert "2026-01-02 05:00:00 JST" in plain(fields)
        await pilot.press("z")
        await wait_for(lambda: "2026-01-01T20:00:00Z" in plain(fields), "UTC")
        await pilot.press("z")
        await wait_for(lambda: "JST" in plain(fields), "local again")


async def test_costs_are_grouped_by_local_day(home: Path, clock: ManualClock) -> None:
    with (home / "vigil.toml").open("a") as toml:
        toml.write('\n[tui]\ntimezone = "Asia/Tokyo"\n')
    settings = load_settings(home)
    store = await open_store(settings, clock)
    day = 1_767_225_600_000  # 2026-01-01T00:00Z
    for at, usd in ((day + 10 * 3_600_000, 1.0), (day + 16 * 3_600_000, 2.0)):  # 19:00 and 01:00+1 in Tokyo
        clock.set(at)
        await store.add_task(NewTask(f"spend {usd}"))
        claim = await store.claim_next(worker="w", lease_ms=60_000)
        assert claim is not None
        await store.record(claim, Outcome(OutcomeKind.SUCCESS, cost_usd=usd), worker="w")
    await store.close()
    clock.set(day + 20 * 3_600_000)
    app = VigilApp(settings, opener=lambda: open_store(settings, clock), clock=clock, probe_interval_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "queue loaded")
        assert "today $2.00" in plain(queue(app).query_one("#spend", Static))  # the header's today is Tokyo's
        await pilot.press("5")
        await wait_for(lambda: isinstance(app.screen, CostsScreen) and app.screen.costs is not None, "costs")
        screen = app.screen
        assert isinstance(screen, CostsScreen)
        assert screen.costs is not None
        assert [(r.key, r.cost_usd) for r in screen.costs.by_day] == [("2026-01-01", 1.0), ("2026-01-02", 2.0)]


def plain(widget: Static) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def test_tui_timezone_must_be_a_known_zone(tmp_path: Path) -> None:
    assert settings_from_mapping({"tui": {"timezone": "Europe/Paris"}}, tmp_path, None).tui.timezone == "Europe/Paris"
    assert settings_from_mapping({}, tmp_path, None).tui.timezone is None
    with pytest.raises(ConfigError, match=r"\[tui\] timezone: expected an IANA time zone"):
        settings_from_mapping({"tui": {"timezone": "Mars/Olympus"}}, tmp_path, None)


async def test_a_new_home_says_what_to_do_and_keeps_what_just_finished_in_view(
    make_app: AppFactory, db: Store, clock: ManualClock
) -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)):
        await wait_for(lambda: queue(app).loads >= 1, "loaded")
        empty = queue(app).query_one("#empty", Static)
        assert empty.display
        assert "Press n to add a task" in plain(empty)
        assert "vigil run" in plain(empty)
        task_id = await add(db, "done in a second")
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        assert not empty.display
        claim = await db.claim_next(worker="w", lease_ms=60_000)
        assert claim is not None
        await db.record(claim, Outcome(OutcomeKind.SUCCESS), worker="w")
        await wait_for(lambda: table(app).tasks[task_id].status is TaskStatus.COMPLETED, "finished, still shown")
        assert "dim" in str(table(app).get_cell(str(task_id), "subject").style)
        assert empty.display
        assert "The dimmed rows finished in the last few minutes" in plain(empty)
        clock.advance(11 * 60_000)
        await add(db, "later work")  # any change refreshes; the finished one has aged out
        await wait_for(lambda: task_id not in shown_ids(app), "gone after a while")


def test_every_glyph_the_tui_draws_is_in_dejavu_sans_mono() -> None:
    """A glyph the terminal's font lacks shows as a box (⏲ and ⧗ did)."""
    font = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")
    if not font.exists() or shutil.which("fc-list") is None:
        pytest.skip("DejaVu Sans Mono or fc-list is not installed")
    source = "".join(p.read_text() for p in Path(tui.__file__).parent.glob("*.py"))
    glyphs = sorted({ch for ch in source if ord(ch) > 0x2000 and ch not in "€"})
    missing = []
    for ch in glyphs:
        found = subprocess.run(
            ["fc-list", f":charset={ord(ch):04x}", "file"], capture_output=True, text=True, check=True
        ).stdout
        if str(font) not in found:
            missing.append(ch)
    assert missing == []


async def test_the_filter_applies_as_you_type(make_app: AppFactory, db: Store) -> None:
    deploy = await add(db, "deploy the web", priority=2)
    await add(db, "tidy the wiki", priority=7)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 2, "rows")
        await pilot.press("slash", *"depl")
        await wait_for(lambda: shown_ids(app) == [deploy], "filtered without enter")
        await pilot.press("space", *"pri<")  # not a filter yet: the last good one stays
        note = queue(app).query_one("#filter-note", Static)
        await wait_for(lambda: "priority must be a number" in plain(note), "why, under the box")
        assert queue(app).filter.text == "depl pri"  # the last text that parsed (two words)
        await pilot.press("3")
        await wait_for(lambda: queue(app).filter.text == "depl pri<3", "the whole filter")
        assert shown_ids(app) == [deploy]


async def test_the_header_counts_the_marked_rows(make_app: AppFactory, db: Store) -> None:
    for n in range(3):
        await add(db, f"t{n}")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 3, "rows")
        badges = queue(app).query_one("#badges", Static)
        await pilot.press("space", "space")
        assert "2 marked" in plain(badges)
        await pilot.press("escape")
        assert "marked" not in plain(badges)


async def test_the_pane_names_the_dependencies_by_id(make_app: AppFactory, db: Store) -> None:
    first = await add(db, "first", priority=1)
    then = await add(db, "then", priority=1, depends_on=(first,))
    app = make_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [first, then], "rows")
        await pilot.press("down")
        body = queue(app).query_one(DetailPane).query_one(Static)
        await wait_for(lambda: f"#{first} (1 unfinished)" in plain(body), "the ids, not a count")


@pytest.mark.parametrize(
    ("key", "label", "screen_type"), [("3", "3 History", HistoryScreen), ("5", "5 Costs", CostsScreen)]
)
async def test_every_screen_says_which_it_is_and_what_the_loop_does(
    make_app: AppFactory, db: Store, key: str, label: str, screen_type: type[LiveScreen[Any]]
) -> None:
    running = await add(db, "running")
    await db.claim_next(worker="w", lease_ms=600_000)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [running], "row")
        await pilot.press(key)
        await wait_for(lambda: isinstance(app.screen, screen_type), label)
        tabs = app.screen.query_one(TabBar).line
        current = [span for span in tabs.spans if "reverse" in str(span.style)]
        assert [tabs.plain[span.start : span.end].strip() for span in current] == [label]
        line = app.screen.query_one(LoopLine)
        await wait_for(lambda: f"#{running}" in plain(line), "the running task on this screen too")


async def test_s_and_a_header_click_sort_by_a_column_and_s_returns_to_dispatch_order(
    make_app: AppFactory, db: Store, clock: ManualClock
) -> None:
    zed = await add(db, "zed", priority=5)
    alpha = await add(db, "alpha", priority=1, scheduled_for=clock.now_ms() + 3_600_000)  # later: after zed
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [zed, alpha], "dispatch order")
        await pilot.press("s")
        assert queue(app).sort_by == (Sort.PRIORITY, False)
        await wait_for(lambda: shown_ids(app) == [alpha, zed], "by priority, by the store")
        note = queue(app).query_one("#filter-note", Static)
        assert "sorted by priority, most urgent first" in plain(note)
        queue(app).table.post_message(DataTable.HeaderSelected(table(app), ColumnKey("subject"), 6, Text("subject")))
        await wait_for(lambda: queue(app).sort_by == (Sort.SUBJECT, False), "sorted by the clicked column")
        await wait_for(lambda: shown_ids(app) == [alpha, zed], "by subject")
        queue(app).table.post_message(DataTable.HeaderSelected(table(app), ColumnKey("subject"), 6, Text("subject")))
        await wait_for(lambda: shown_ids(app) == [zed, alpha], "a second click reverses")
        assert "sorted by subject, Z to A" in plain(note)
        for _ in range(3):  # subject → source → cost → dispatch order
            await pilot.press("s")
        assert queue(app).sort_by is None
        await wait_for(lambda: shown_ids(app) == [zed, alpha], "dispatch order again")


async def test_a_frozen_view_and_a_paused_loop_are_named_apart(make_app: AppFactory, db: Store) -> None:
    await add(db, "x")
    app = make_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 1, "row")
        await db.set_loop_values({"gate": {"state": "paused", "reason": "upgrade", "until": None}})
        loop = queue(app).query_one("#gate", Static)  # a closed gate has a line of its own
        await wait_for(lambda: "loop paused: upgrade" in plain(loop), "the loop's pause")
        await pilot.press("p")
        header = plain(loop) + plain(queue(app).query_one("#badges", Static))
        assert "FROZEN" in header
        assert "PAUSED" not in header  # the view is frozen; only the loop is paused
        await wait_for(lambda: "L Resume loop" in str(queue(app).query_one(KeyBar).render()), "L in the footer")


async def test_the_pane_names_the_github_issue_and_pull_request(make_app: AppFactory, db: Store) -> None:
    link = GitHubLink("octo/demo", issue=7, issue_url="https://github.com/octo/demo/issues/7")
    task_id = await add(db, "Fix the parser", github=link)
    await db.set_github(task_id, replace(link, pull=12, pull_url="https://github.com/octo/demo/pull/12"))
    app = make_app()
    async with app.run_test(size=(160, 30)):
        await wait_for(lambda: shown_ids(app) == [task_id], "rows")
        body = queue(app).query_one(DetailPane).query_one(Static)
        await wait_for(lambda: "octo/demo#7 https://github.com/octo/demo/issues/7" in plain(body), "the issue")
        assert "octo/demo#12 https://github.com/octo/demo/pull/12" in plain(body)
