"""The command palette, the footer and the help: every Vigil action reachable, Help
and Quit always shown, keys grouped and dimmed where they do not apply."""

from __future__ import annotations

import io
from functools import partial

import pytest
from rich.console import Console
from textual.command import CommandList, CommandPalette
from textual.widgets import Static

from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import shown_ids
from tui.app import VigilApp
from tui.dialogs import HelpScreen
from tui.forms import DeferForm
from tui.keybar import KeyBar
from tui.keys import grouped, screen_keys
from tui.needs_you_screen import NARROW_COLUMNS, NeedsYouScreen
from vigil.store import Store


def offered(app: VigilApp, title: str) -> bool:
    return title in palette_titles(app)


def palette_titles(app: VigilApp) -> list[str]:
    options = app.screen.query_one(CommandList)
    # each prompt is the title, then the help on a second line
    return [str(options.get_option_at_index(i).prompt).split("\n")[0] for i in range(options.option_count)]


async def test_the_palette_finds_vigil_actions_and_runs_them(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "later, please")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        await pilot.press("ctrl+p")
        await wait_for(lambda: isinstance(app.screen, CommandPalette), "palette")
        for query, title in (("history", "History (3)"), ("follow", "Follow (f)"), ("pause", "Pause loop (L)")):
            await pilot.press(*query)
            await wait_for(partial(offered, app, title), f"{title} offered")
            for _ in query:
                await pilot.press("backspace")
        await pilot.press(*"defer")
        await wait_for(lambda: "Defer (d)" in palette_titles(app), "defer offered, with its key")
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, DeferForm), "the palette opened the defer dialog")


async def test_the_palette_says_when_an_action_does_not_apply(make_app: AppFactory, db: Store) -> None:
    await add(db, "pending, so retry does not apply")
    app = make_app()
    async with app.run_test(size=(100, 30)):
        await wait_for(lambda: len(shown_ids(app)) == 1, "row")
        retry = next(c for c in app.get_system_commands(app.screen) if c.title == "Retry (r)")
        assert "does not apply now" in retry.help
        retry.callback()
        await wait_for(lambda: "Retry does not apply to the highlighted task" in app.notices, "said so")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Quit (q/^c/^q)" in titles
        assert "Quit" not in titles  # Textual's quits without asking; ours asks when it started the loop


@pytest.mark.parametrize("width", [60, 80, 100, 120, 160])
async def test_the_footer_keeps_help_and_quit_at_every_width(make_app: AppFactory, db: Store, width: int) -> None:
    await add(db, "x")
    app = make_app()
    async with app.run_test(size=(width, 24)) as pilot:
        if width <= NARROW_COLUMNS:  # a phone's width opens on Needs you; 1 is the queue
            await wait_for(lambda: isinstance(app.screen, NeedsYouScreen), "needs you first")
            await pilot.press("1")
        await wait_for(lambda: len(shown_ids(app)) == 1, "row")
        await pilot.pause()
        line = str(app.screen.query_one(KeyBar).render()).rstrip()
        assert line.endswith("q Quit  ? Help"), line
        assert len(line) <= width - 2, line
        assert line.startswith("n New"), line
        labels = {"New", "Raise", "Lower", "Defer", "Cancel", "Retry", "Mark", "Filter", "Freeze", "Approve"}
        words = set(line.split()) - {"n", "+", "-", "d", "x", "r", "spc", "/", "p", "a", "L", "q", "?"}
        assert words <= labels | {"Pause", "loop", "Quit", "Help"}, line  # whole words only, never cut
        if width >= 80:  # the keys used most that apply to the row, in whole words
            for key in ("n New", "/ Filter", "d Defer", "x Cancel", "+ Raise"):
                assert key in line, line
        if width == 80:  # a pending task is not awaiting approval: a key that does not apply leaves first
            assert "a Approve" not in line, line
        if width >= 160:
            assert "p Freeze" in line, line
            assert "L Pause loop" in line, line


async def test_the_footer_names_the_loop_key_by_what_it_will_do(make_app: AppFactory, db: Store) -> None:
    app = make_app()
    async with app.run_test(size=(160, 24)) as pilot:
        await wait_for(lambda: queue_loaded(app), "loaded")
        assert "L Pause loop" in str(app.screen.query_one(KeyBar).render())
        await pilot.press("L")
        await pilot.press(*"backup", "enter")
        await wait_for(lambda: "L Resume loop" in str(app.screen.query_one(KeyBar).render()), "relabelled")


def queue_loaded(app: VigilApp) -> bool:
    return hasattr(app, "ctx") and app.queue_screen.loads >= 1


async def test_help_groups_vigil_keys_first_once_each_and_dims_what_does_not_apply(
    make_app: AppFactory, db: Store
) -> None:
    await add(db, "pending")
    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 1, "row")
        keys = grouped(screen_keys(app.screen))
        groups = list(dict.fromkeys(k.group for k in keys))
        assert groups == ["Task", "View", "Screens", "Loop", "App", "Table and text"]
        assert [k.shown for k in keys].count("+") == 1  # + and = are one key
        by_name = {k.name: k for k in keys}
        assert by_name["raise"].enabled
        assert not by_name["retry"].enabled
        await pilot.press("question_mark")
        await wait_for(lambda: isinstance(app.screen, HelpScreen), "help")
        console = Console(width=100, record=True, file=io.StringIO())
        console.print(app.screen.query(Static)[1].content)
        text = console.export_text()
        assert text.index("Task") < text.index("View") < text.index("Screens") < text.index("Table and text")
        assert text.count("Raise") == 1
        retry_line = next(line for line in text.splitlines() if "Retry" in line)
        assert "(not now)" in retry_line
        assert "(not now)" not in next(line for line in text.splitlines() if "Raise" in line)
