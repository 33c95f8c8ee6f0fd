"""The top line of every screen names the home it watches, the Diff view's too."""

from __future__ import annotations

from tests.code.repos import Repo
from tests.tui.conftest import AppFactory
from tests.tui.test_diff_screen import awaiting_review, open_diff, repo
from tui.tabs import TabBar
from vigil.config import Settings
from vigil.store import Store

__all__ = ["repo"]  # the fixture, used here as there


async def test_the_diff_views_top_line_names_the_home(
    make_app: AppFactory, db: Store, settings: Settings, repo: Repo
) -> None:
    task_id, _ = await awaiting_review(db, settings, repo)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_diff(app, pilot, task_id)
        top = str(screen.query_one(TabBar).render())
        assert top.rstrip().endswith("/home"), top  # the home's path, cut at the front when long
