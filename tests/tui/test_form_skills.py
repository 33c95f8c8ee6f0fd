"""The new-task form refuses a skill the home does not have, naming those it has."""

from __future__ import annotations

from textual.widgets import Input

from tests.tui.conftest import AppFactory, wait_for
from tests.tui.helpers import queue, shown_ids
from tui.forms import NewTaskForm
from vigil.config import Settings
from vigil.store import Store


async def test_an_unknown_skill_is_refused_in_the_form(make_app: AppFactory, db: Store, settings: Settings) -> None:
    (settings.skills_dir / "triage").mkdir(parents=True)
    (settings.skills_dir / "triage" / "SKILL.md").write_text("---\ndescription: triage\n---\nSort it.\n")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "first load")
        await pilot.press("n")
        await wait_for(lambda: isinstance(app.screen, NewTaskForm), "form")
        form = app.screen
        form.query_one("#subject", Input).value = "sort the inbox"
        form.query_one("#skills", Input).value = "triag"
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, NewTaskForm)  # refused, the form stays open
        assert "unknown skill 'triag'; skills in this home: triage" in str(form.query_one("#error").render())
        form.query_one("#skills", Input).value = "triage"
        await pilot.press("ctrl+s")
        await wait_for(lambda: len(shown_ids(app)) == 1, "new row")
        assert (await db.get_task(shown_ids(app)[0])).skills == ("triage",)
