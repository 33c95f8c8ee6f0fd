"""The queue is a window on the whole store: on a home of 10,000 tasks built by SQL,
every task is within reach by filter, state key, sort and paging; and a real
`vigil run` draining 2,000 due tasks under the open dashboard leaves no error, no
stale row, and the store's counts on the screen."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import Static

from tests.tui.conftest import AppFactory, wait_for
from tests.tui.crowd import crowd
from tests.tui.helpers import notes, queue, shown_ids, table
from tui.app import VigilApp
from tui.loaders import WINDOW_ROWS
from vigil.clock import ManualClock, SystemClock
from vigil.config import Settings
from vigil.liveness import LoopCondition
from vigil.states import TASK_STATES, parse_states
from vigil.store import Store, open_store
from vigil.task_query import Sort, TaskQuery

pytestmark = pytest.mark.slow
TOTAL = 10_000
DRAIN = 2_000
DRAIN_SAFETY_S = 600.0  # a bound on a busy machine, not a measurement


def note(app: VigilApp) -> str:
    return str(queue(app).query_one("#filter-note", Static).render())


def window_total(app: VigilApp) -> int | None:
    snapshot = queue(app).snapshot
    return None if snapshot is None else snapshot.window.total


def stopped(app: VigilApp) -> bool:
    """The queue's last refresh saw the loop stop cleanly."""
    snapshot = queue(app).snapshot
    return snapshot is not None and snapshot.health(SystemClock().now_ms()).condition is LoopCondition.STOPPED


async def answer(db: Store, query: TaskQuery) -> list[int]:
    """Every task the store lists for ``query``, in its order."""
    return [t.id for t in (await db.task_window(query, limit=TOTAL)).tasks]


async def test_every_task_of_ten_thousand_is_within_reach(
    make_app: AppFactory, db: Store, settings: Settings, clock: ManualClock
) -> None:
    await crowd(settings.store.path, total=TOTAL, due_at_ms=clock.now_ms() - 60_000)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: queue(app).loads >= 1, "first screen")
        assert len(shown_ids(app)) == WINDOW_ROWS
        assert "rows 1–100 of 10,000" in note(app)
        counts = str(queue(app).query_one("#counts", Static).render())
        assert "Pending 9,700" in counts
        assert "Blocked 300" in counts
        assert "Approval 200" in counts

        # awaiting approval: its own key, marker and status word; none is out of reach
        await pilot.press("V")
        await wait_for(lambda: window_total(app) == 200, "the 200 awaiting approval")
        awaiting = await answer(db, TaskQuery(states=parse_states("approval")))
        assert shown_ids(app) == awaiting[:WINDOW_ROWS]
        await pilot.press("G")
        await wait_for(lambda: table(app).current_id == awaiting[-1], "the last one awaiting approval")
        assert {table(app).get_cell(str(i), "next").plain for i in shown_ids(app)} == {"?"}
        assert {table(app).get_cell(str(i), "status").plain for i in shown_ids(app)} == {"approval"}
        await pilot.press("V", "B")
        await wait_for(lambda: window_total(app) == 300, "every blocked task, those awaiting approval too")
        assert "rows 1–100 of 300" in note(app)
        await pilot.press("B")

        # a task far down the list, by id, by words, by a filter of several qualifiers
        await pilot.press("slash", *"id:9950")
        await wait_for(lambda: shown_ids(app) == [9950], "id:9950")
        await pilot.press("escape", "escape")
        await wait_for(lambda: window_total(app) == TOTAL, "the filter cleared")
        await pilot.press("slash", *"skill:web source:sensor:inbox pri<3 task 99")
        query = TaskQuery(words=("task", "99"), sources=("sensor:inbox",), skills=("web",), priority=("<", 3))
        expected = await answer(db, query)
        assert 0 < len(expected) < WINDOW_ROWS
        await wait_for(lambda: shown_ids(app) == expected, "the store's answer, from every task")
        await pilot.press("escape", "escape")
        await wait_for(lambda: window_total(app) == TOTAL, "the filter cleared")

        # the ends and the middle of 10,000 rows, in the dispatcher's order
        everything = await answer(db, TaskQuery())
        await pilot.press("G")
        await wait_for(lambda: table(app).current_id == everything[-1], "G: the very last task")
        assert f"rows {TOTAL - WINDOW_ROWS + 1:,}–{TOTAL:,} of {TOTAL:,}" in note(app)
        await pilot.press("g")
        await wait_for(lambda: table(app).current_id == everything[0], "g: the very first task")
        table(app).move_cursor(row=WINDOW_ROWS - 1)
        await pilot.press("down")
        await wait_for(lambda: table(app).current_id == everything[WINDOW_ROWS], "past the last row: the next task")
        assert queue(app).window_start == WINDOW_ROWS // 2
        table(app).move_cursor(row=0)
        above = everything[WINDOW_ROWS // 2 - 1]
        await pilot.press("up")
        await wait_for(lambda: table(app).current_id == above, "past the first row: the task above")
        assert queue(app).window_start == 0

        # a sort covers every task, not the rows on screen
        await pilot.press("s")
        by_priority = await answer(db, TaskQuery(sort=Sort.PRIORITY))
        await wait_for(lambda: shown_ids(app) == by_priority[:WINDOW_ROWS], "sorted by the store")
        await pilot.press("G")
        await wait_for(lambda: table(app).current_id == by_priority[-1], "and the sorted list's end is in reach")
        assert not [n for n in notes(app) if "failed" in n]


@pytest.mark.timeout(DRAIN_SAFETY_S + 120)
async def test_a_real_loop_drains_two_thousand_tasks_under_the_dashboard(settings: Settings, home: Path) -> None:
    """The fast drain that broke the queue for good: `vigil run` (dry run) works
    through 2,000 due tasks while the dashboard refreshes as often as it can."""
    await crowd(settings.store.path, total=DRAIN, due_at_ms=SystemClock().now_ms() - 60_000, blocked=False, skill=None)
    app = VigilApp(settings, opener=lambda: open_store(settings), clock=SystemClock(), probe_interval_s=0.05)
    db = await open_store(settings)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    log = (home / "logs" / "run.out").open("wb")
    try:
        async with app.run_test(size=(120, 30)):
            await wait_for(lambda: queue(app).loads >= 1, "first screen")
            loop = subprocess.Popen(
                [sys.executable, "-m", "vigil", "--home", str(home), "run"], env=env, stdout=log, stderr=log
            )
            try:
                await wait_for(
                    lambda: window_total(app) == 0, "the dashboard sees the queue drained", timeout_s=DRAIN_SAFETY_S
                )
            finally:
                loop.send_signal(signal.SIGTERM)
                assert await asyncio.to_thread(loop.wait, 60) == 0
            await wait_for(lambda: stopped(app), "a refresh after the loop said it stopped")
            await asyncio.sleep(0.3)  # nothing left to change: the last refresh is the truth

            assert [n for n in notes(app) if "failed" in n or "Error" in n] == []
            assert table(app).rebuilds == 0  # never needed a rebuild: no change failed half way
            counts = await db.task_window(TaskQuery(states=TASK_STATES))
            assert counts.counts["completed"] == DRAIN
            snapshot = queue(app).snapshot
            assert snapshot is not None
            assert dict(snapshot.window.counts) == dict(counts.counts)  # the store's counts, on the screen
            shown = table(app).tasks
            assert 0 < len(shown) <= 5  # only the latest finishes, dimmed
            for task_id, task in shown.items():  # no stale row: each as the store has it
                assert task == await db.get_task(task_id)
            header = str(queue(app).query_one("#counts", Static).render())
            assert f"Completed {DRAIN:,}" in header
            assert "Pending 0" in header
    finally:
        log.close()
        await db.close()
