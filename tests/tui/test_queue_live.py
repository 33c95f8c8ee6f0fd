"""The queue table: dispatch order, live updates from other processes, and the
cursor and marks staying on the same task id when rows move."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult

from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import cell, queue, shown_ids, table
from tests.tui.test_filters import BASE
from tui.loaders import QueueSnapshot, load_queue
from tui.queue_table import QueueTable
from vigil.clock import ManualClock
from vigil.models import TaskStatus
from vigil.store import Store
from vigil.task_query import TaskQuery

pytestmark = pytest.mark.slow


async def vigil_subprocess(home: Path, *args: str) -> str:
    """Run the real CLI in another process (without blocking the app's loop)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vigil",
        "--home",
        str(home),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_rows_are_in_dispatch_order_with_next_and_later_marked(
    make_app: AppFactory, db: Store, clock: ManualClock
) -> None:
    low = await add(db, "low", priority=7)
    later = await add(db, "urgent but later", priority=1, scheduled_for=clock.now_ms() + 3_600_000)
    high = await add(db, "high", priority=2)
    mid = await add(db, "mid", priority=5)
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: len(shown_ids(app)) == 4, "four rows")
        expected = [t.id for t in await db.queue()]
        assert shown_ids(app) == expected == [high, mid, low, later]
        assert cell(app, high, "next") == "▶"
        assert cell(app, later, "next") == "◷"
        assert cell(app, later, "when").startswith("due in")
        assert cell(app, mid, "next") == " "


async def test_task_added_by_another_process_appears_without_a_keypress(
    make_app: AppFactory, db: Store, home: Path
) -> None:
    await add(db, "already there")
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: len(shown_ids(app)) == 1, "first row")
        out = await vigil_subprocess(home, "task", "add", "from another process")
        new_id = int(out.split("#")[1])
        await wait_for(lambda: new_id in shown_ids(app), "the new task on screen")
        assert cell(app, new_id, "subject") == "from another process"


async def test_cursor_stays_on_task_when_a_more_urgent_one_is_inserted_above(
    make_app: AppFactory, db: Store, home: Path
) -> None:
    ids = [await add(db, f"task {i}", priority=5) for i in range(4)]
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 4, "rows")
        await pilot.press("down", "down")
        assert table(app).current_id == ids[2]
        out = await vigil_subprocess(home, "task", "add", "urgent", "-p", "1")
        urgent = int(out.split("#")[1])
        await wait_for(lambda: urgent in shown_ids(app), "urgent task on screen")
        assert shown_ids(app)[0] == urgent
        assert table(app).current_id == ids[2]
        assert table(app).cursor_row == 3  # the row moved down; the cursor moved with it


async def test_cursor_and_marks_follow_tasks_when_priorities_change(make_app: AppFactory, db: Store) -> None:
    a, b, c = [await add(db, name, priority=5) for name in "abc"]
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 3, "rows")
        await pilot.press("space")  # mark a; cursor moves to b
        assert table(app).marks == {a}
        assert table(app).current_id == b
        await db.set_priority(c, 1, actor="human")
        await db.set_priority(a, 9, actor="human")
        await wait_for(lambda: shown_ids(app) == [c, b, a], "reordered rows")
        assert table(app).current_id == b
        assert table(app).marks == {a}
        assert cell(app, a, "mark") == "●"


async def test_rows_are_updated_in_place_not_cleared(
    make_app: AppFactory, db: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await add(db, "a")
    b = await add(db, "b")
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: len(shown_ids(app)) == 2, "rows")
        row_key_before = table(app).get_row_index(str(a))
        cleared: list[bool] = []
        original_clear = table(app).clear

        def recording_clear(columns: bool = False) -> QueueTable:
            cleared.append(True)
            return original_clear(columns)

        monkeypatch.setattr(table(app), "clear", recording_clear)
        await db.cancel(b, actor="human")
        await wait_for(lambda: shown_ids(app) == [a], "canceled row removed")
        assert cleared == []
        assert table(app).get_row_index(str(a)) == row_key_before == 0


async def test_relative_times_tick_without_queries(make_app: AppFactory, db: Store, clock: ManualClock) -> None:
    task_id = await add(db, "aging")
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: task_id in shown_ids(app), "row")
        loads = queue(app).loads
        assert cell(app, task_id, "when") == "age <1m"
        clock.advance(6 * 60_000)  # ages count whole minutes from the start of the minute: 5m
        await wait_for(lambda: cell(app, task_id, "when") == "age 5m", "age ticks to 5m")
        assert queue(app).loads == loads  # no data changed, so nothing was reloaded


async def test_a_slow_screen_under_a_stream_of_commits_still_refreshes(
    make_app: AppFactory, db: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit arriving during a load queues one more load; it never cancels the
    running one, so a load slower than the commit rate still completes."""
    from tui import queue_screen

    async def slow_load(store: Store, query: TaskQuery, now_ms: int, **options: Any) -> QueueSnapshot:
        await asyncio.sleep(0.25)  # slower than the stream of commits below
        return await load_queue(store, query, now_ms, **options)

    monkeypatch.setattr(queue_screen, "load_queue", slow_load)
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: queue(app).loads >= 1, "first load")
        first = queue(app).loads
        for n in range(30):
            await add(db, f"stream {n}")
            await asyncio.sleep(0.05)
        await wait_for(lambda: queue(app).loads >= first + 3, "loads completed during the stream")
        await wait_for(lambda: len(shown_ids(app)) == 30, "caught up with every commit")


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield QueueTable(id="queue")


async def test_a_task_listed_twice_is_one_row_and_a_half_done_change_is_rebuilt() -> None:
    """The cause of the queue that broke for good under a fast drain: a task read as
    open and, a moment later, as just finished was listed twice; the second removal
    of its row failed half way, and every later change and tick failed on what was
    left (RowDoesNotExist, KeyError). A task is one row, and a change that fails
    half way rebuilds the rows instead of leaving them stale."""
    now = 1_767_225_600_000
    app = TableApp()
    async with app.run_test(size=(120, 20)) as pilot:
        grid = app.query_one(QueueTable)
        a, b = replace(BASE, id=1, subject="a"), replace(BASE, id=2, subject="b")
        done = replace(b, status=TaskStatus.COMPLETED, completed_at=now)
        grid.reconcile([a, b, done], now, None)
        assert (grid.order, grid.row_count, grid.tasks[2].status) == ([1, 2], 2, TaskStatus.COMPLETED)
        grid.reconcile([a], now, None)  # the finished one leaves
        assert (grid.order, grid.row_count) == ([1], 1)

        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("cell went missing")

        grid.update_cell = broken  # type: ignore[method-assign]
        grid.reconcile([replace(a, priority=1), b], now, None)  # a change that fails half way
        del grid.update_cell
        assert grid.rebuilds == 1
        assert (grid.order, grid.row_count) == ([1, 2], 2)
        assert grid.get_cell("1", "pri").plain == "1"
        grid.tick(now + 3_600_000)  # every row it lists is there to tick
        await pilot.pause()
