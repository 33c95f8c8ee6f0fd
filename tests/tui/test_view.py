"""How the queue view behaves: freezing, fitting the width, jumping, times."""

from __future__ import annotations

from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import queue, shown_ids, table
from tui.dialogs import HelpScreen
from tui.forms import DeferForm
from vigil.store import Store


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
