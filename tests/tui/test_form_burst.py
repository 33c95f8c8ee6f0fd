"""The new-task form keeps every key of a fast burst: typed faster than the screen
handles keys, the last letter before enter or ctrl+s still lands in its box."""

from __future__ import annotations

import pytest
from textual import events

from tests.tui.conftest import AppFactory, wait_for
from tests.tui.helpers import queue, shown_ids
from tui.app import VigilApp
from tui.forms import NewTaskForm
from vigil.store import Store

BOXES = ("subject", "description", "priority", "skills", "due", "key")


def burst(app: VigilApp, keys: list[str]) -> None:
    """Every key handed to the app at once, as a terminal delivers a paste or fast typing."""
    driver = app._driver
    assert driver is not None
    for key in keys:
        character = key if len(key) == 1 else {"space": " ", "minus": "-"}.get(key)
        event = events.Key(key, character)
        event.set_sender(app)
        driver.send_message(event)


def typed(text: str) -> list[str]:
    return [{" ": "space", "-": "minus"}.get(c, c) for c in text]


@pytest.mark.parametrize("submit", ["enter", "ctrl+s"])
async def test_a_fast_burst_keeps_the_last_key_of_each_box(make_app: AppFactory, db: Store, submit: str) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "first load")
        await pilot.press("n")
        await wait_for(lambda: isinstance(app.screen, NewTaskForm), "form")
        keys = [*typed("triage the inbox"), "tab", *typed("read it"), *["tab"] * 4, *typed("kabc"), submit]
        burst(app, keys)
        await wait_for(lambda: len(shown_ids(app)) == 1, "the new task")
        task = await db.get_task(shown_ids(app)[0])
        assert (task.subject, task.description, task.source_key) == ("triage the inbox", "read it", "kabc")


async def test_a_burst_that_opens_the_form_lands_whole_in_it(make_app: AppFactory, db: Store) -> None:
    """n and the text after it in one burst: the letters that arrive before the form
    is on screen still land in its first box."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "first load")
        burst(app, ["n", *typed("triage-inbox"), "tab", "tab", "tab", "tab", "tab", *typed("kabc"), "enter"])
        await wait_for(lambda: len(shown_ids(app)) == 1, "the new task")
        task = await db.get_task(shown_ids(app)[0])
        assert (task.subject, task.source_key) == ("triage-inbox", "kabc")
        await pilot.pause()
