"""A home with 1,000,000 tasks (mostly finished): the TUI opens, stays live and
responsive, and every query it runs is bounded (checked with EXPLAIN QUERY PLAN).

The database is built once per module through the real schema (``bench.million``:
migrated by ``SqliteStore``, then bulk-inserted in one transaction)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from bench.million import build
from tests.store.plans import sqlite_plan
from tests.tui.conftest import wait_for
from tests.tui.helpers import notes, queue, shown_ids, table
from tui.app import VigilApp
from tui.history_screen import HistoryScreen
from tui.loaders import HISTORY_PAGE, HOUR_MS, WINDOW_ROWS
from vigil.clock import ManualClock
from vigil.config import Settings, load_settings
from vigil.home import init_home
from vigil.models import NewTask, TaskStatus
from vigil.states import TASK_STATES, parse_states
from vigil.store import CostGroup, open_store
from vigil.store.sql.costs import COST_ROLLUP
from vigil.store.sql.runs import NEXT_DUE_AT, NEXT_DUE_ID
from vigil.store.sql.tasks import search_tasks
from vigil.store.sql.window import RECENT, history_sql, page_sql
from vigil.store.sqlite import SqliteStore
from vigil.store.transaction import Sql
from vigil.task_query import Sort, TaskQuery

pytestmark = pytest.mark.slow
WALKED_IN_ORDER = (
    "history page",
    "recently finished",
    "window: completed",
    "window: finished",
)
TOTAL = 1_000_000
OPEN = 300
NOW_MS = 1_767_225_600_000


@pytest.fixture(scope="module")
def big_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("million") / "home"
    init_home(home)
    build(load_settings(home).store.path, total=TOTAL, open_tasks=OPEN, now_ms=NOW_MS)
    return home


@pytest.fixture
def big_settings(big_home: Path) -> Settings:
    return load_settings(big_home)


def full_scans(plan: list[str]) -> list[str]:
    """Plan lines that read a whole table (SQLite says SCAN without an index)."""
    return [line for line in plan if line.startswith(("SCAN tasks", "SCAN runs")) and "USING" not in line]


async def test_every_tui_query_is_bounded(big_settings: Settings) -> None:
    store = await SqliteStore.open(big_settings.store.path, clock=ManualClock(NOW_MS))
    try:
        finished = {"before_at": 2**62, "before_id": 2**62, "limit": HISTORY_PAGE}
        search = search_tasks([TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED])
        search_params = {"before_id": 2**62, "pattern": "%x%", "limit": HISTORY_PAGE}
        page = {"now": NOW_MS, "limit": WINDOW_ROWS, "offset": 0}
        queries: dict[str, tuple[Sql, Mapping[str, object]]] = {
            "next due": (NEXT_DUE_AT, {}),
            "next task": (NEXT_DUE_ID, {"now": NOW_MS}),
            "recently finished": (RECENT, {"since": NOW_MS - 600_000, "limit": 5}),
            "history page": (history_sql(searching=False), finished),
            "history search": (search, search_params),
            "hourly cost": (COST_ROLLUP[CostGroup.HOUR], {"since": NOW_MS}),
            "daily cost": (COST_ROLLUP[CostGroup.DAY], {"since": NOW_MS}),
        }
        # The queue's window over the open tasks, whatever its filter or sort, and the
        # finished ones in the order they finished: an index, never the whole table.
        windows = {
            "queue": TaskQuery(),
            "queue by subject": TaskQuery(sort=Sort.SUBJECT, words=("open",)),
            "approval": TaskQuery(states=parse_states("approval")),
            "completed": TaskQuery(states=parse_states("completed")),
            "finished": TaskQuery(states=parse_states("completed,failed,canceled")),
            "every task by age": TaskQuery(states=TASK_STATES, sort=Sort.AGE, descending=True),
        }
        for name, query in windows.items():
            rows, _, where_params = page_sql(query)
            queries[f"window: {name}"] = (rows, {**where_params, **page})
        by_age = queries.pop("window: every task by age")
        # the rowid order, walked down and stopped by LIMIT (SQLite calls that walk SCAN too)
        assert await sqlite_plan(store, *by_age) == ["SCAN tasks"]
        for name, (sql, params) in queries.items():
            plan = await sqlite_plan(store, sql, params)
            assert full_scans(plan) == [], f"{name} scans a table: {plan}"
            if name in WALKED_IN_ORDER:  # a page of a million rows: an index walk that stops, no sort
                assert not any("TEMP B-TREE" in line for line in plan), (name, plan)
        search_plan = await sqlite_plan(store, search, search_params)
        assert any("PRIMARY KEY" in line for line in search_plan)  # walks ids downwards, stops at LIMIT
        for name in ("history page", "recently finished", "window: completed", "window: finished"):
            assert "USING INDEX ix_tasks_finished" in " ".join(await sqlite_plan(store, *queries[name])), name
    finally:
        await store.close()


async def test_million_task_home_opens_and_stays_responsive(big_settings: Settings) -> None:
    clock = ManualClock(NOW_MS + HOUR_MS)
    app = VigilApp(big_settings, opener=lambda: open_store(big_settings, clock), clock=clock, probe_interval_s=0.05)
    other = await open_store(big_settings, clock)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(lambda: hasattr(app, "ctx") and queue(app).loads >= 1, "first screen", timeout_s=60)
            assert len(shown_ids(app)) == min(OPEN, WINDOW_ROWS)
            snapshot = queue(app).snapshot
            assert snapshot is not None
            assert sum(n for name, n in snapshot.window.counts.items() if name != "approval") == TOTAL
            assert snapshot.window.total == OPEN
            # keys answer at once, and writes go through
            first = table(app).current_id
            assert first is not None
            await pilot.press("down", "up", "minus")
            await wait_for(lambda: any(f"#{first} priority" in n for n in notes(app)), "priority changed")
            # another process's commit reaches the screen without a keypress
            added = await other.add_task(NewTask("needle in a million", priority=1))
            await wait_for(lambda: added.task_id in shown_ids(app), "new task on screen", timeout_s=60)
            # history pages by keyset, newest first
            await pilot.press("3")
            await wait_for(
                lambda: isinstance(app.screen, HistoryScreen) and len(app.screen.rows) == HISTORY_PAGE, "page 1"
            )
            screen = app.screen
            assert isinstance(screen, HistoryScreen)
            assert all(t.status in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED) for t in screen.rows)
            await pilot.press("m")
            await wait_for(lambda: len(screen.rows) == 2 * HISTORY_PAGE, "page 2", timeout_s=60)
            ids = [t.id for t in screen.rows]
            assert ids == sorted(ids, reverse=True)
            await pilot.press("5")
            await wait_for(lambda: app.screen.__class__.__name__ == "CostsScreen", "costs screen")
            await wait_for(lambda: getattr(app.screen, "loads", 0) >= 1, "costs loaded", timeout_s=60)
    finally:
        await other.close()
