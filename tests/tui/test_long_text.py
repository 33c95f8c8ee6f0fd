"""A 100,000-character subject and description, and the longest note stored: the task screen and the
detail pane show their start with a marker, so every field stays in sight; the
store keeps them whole."""

from __future__ import annotations

from textual.widgets import Static

from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import shown_ids
from tui.task_screen import TaskScreen
from vigil.caps import NOTE_CHARS
from vigil.printable import SUBJECT_SHOWN_CHARS
from vigil.store import Store

LONG = "x" * 100_000


async def test_the_task_screen_cuts_long_text_with_a_marker(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "Triage " + LONG, description="Read " + LONG)
    await db.add_note(task_id, "Note " + LONG[: NOTE_CHARS - 5], author="human")  # the longest note stored
    app = make_app()
    async with app.run_test(size=(120, 50)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "the task listed")
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
        screen = app.screen
        assert isinstance(screen, TaskScreen)
        title = str(screen.query_one("#title", Static).render())
        assert title.endswith(f"… [{len(LONG) + 7 - SUBJECT_SHOWN_CHARS:,} more characters]")
        assert len(title) < SUBJECT_SHOWN_CHARS + 100
        notes = str(screen.query_one("#notes", Static).render())
        assert "more characters]" in notes
        assert len(notes) < 10_000
        assert len((await db.get_task(task_id)).subject) == len(LONG) + 7  # stored whole
