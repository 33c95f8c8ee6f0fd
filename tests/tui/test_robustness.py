"""Hostile text, failing queries, stale results, and a database that is locked,
missing or replaced: the app shows the problem and carries on."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import Static

from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import cell, notes, queue, shown_ids, table
from tui.detail import DetailPane
from tui.header import StatusHeader
from tui.task_screen import TaskScreen
from vigil.config import Settings
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat, Task
from vigil.store import Store
from vigil.task_query import TaskWindow

pytestmark = pytest.mark.slow

HOSTILE = [
    "closing [/] tag",
    "[bold]not bold[/bold] [link=http://x]x[/link]",
    "emoji 😀🎉 and flags 🇫🇷",
    "עברית מימין לשמאל",  # right-to-left
    "x" * 10_000,
    "tab\there\nnew line",
]


async def test_hostile_subjects_display_as_text(make_app: AppFactory, db: Store) -> None:
    ids = [await add(db, subject, description=subject) for subject in HOSTILE]
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == len(HOSTILE), "rows")
        assert cell(app, ids[0], "subject") == "closing [/] tag"
        assert cell(app, ids[1], "subject").startswith("[bold]not bold[/bold]")
        assert cell(app, ids[4], "subject").endswith("…")
        for _ in HOSTILE:  # every detail pane renders
            await pilot.press("down")
            await pilot.pause()
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1, "task screen")
        await pilot.pause()
        assert app.is_running


async def test_a_failing_query_is_shown_and_the_app_keeps_running(
    make_app: AppFactory, db: Store, tmp_path: Path
) -> None:
    await add(db, "one")
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: len(shown_ids(app)) == 1, "row")
        original = app.ctx.store.task_window

        async def broken(*args: object, **kwargs: object) -> TaskWindow:
            raise RuntimeError("disk on fire")

        app.ctx.store.task_window = broken  # type: ignore[method-assign]
        await add(db, "two")
        await wait_for(lambda: any("disk on fire" in n for n in notes(app)), "error shown")
        note = queue(app).query_one("#filter-note", Static)
        said = "refresh failed (RuntimeError: disk on fire); trying again"
        await wait_for(lambda: said in str(note.render()), "said on the screen")
        failures = queue(app).failures
        await wait_for(lambda: queue(app).failures > failures, "tried again, with no commit to prompt it")
        assert sum("disk on fire" in n for n in notes(app)) == 1  # said once, not at every try
        assert app.is_running
        app.ctx.store.task_window = original  # type: ignore[method-assign]
        await wait_for(lambda: len(shown_ids(app)) == 2, "recovered by the retry alone: not left stale")
        assert "refresh failed" not in str(note.render())


async def test_result_arriving_after_the_screen_closed_is_dropped(make_app: AppFactory, db: Store) -> None:
    task_id = await add(db, "slow")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        release = asyncio.Event()
        original = app.ctx.store.get_task

        async def slow_get(task_id: int) -> Task:
            await release.wait()
            return await original(task_id)

        app.ctx.store.get_task = slow_get  # type: ignore[method-assign]
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, TaskScreen), "task screen open")
        task_screen = app.screen
        await pilot.press("escape")
        await wait_for(lambda: app.screen is queue(app), "closed")
        release.set()
        await pilot.pause(0.2)
        assert isinstance(task_screen, TaskScreen)
        assert task_screen.loads == 0
        assert app.is_running


async def test_replaced_database_shows_banner_then_reopens(
    make_app: AppFactory, db: Store, settings: Settings, tmp_path: Path
) -> None:
    await add(db, "in the old file")
    backup = tmp_path / "backup.db"
    await db.backup(backup)
    await add(db, "only in the live file")
    path = settings.store.path
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: len(shown_ids(app)) == 2, "both rows")
        for suffix in ("", "-wal", "-shm"):  # a restore replaces the file and its WAL
            if Path(f"{path}{suffix}").exists():
                os.rename(f"{path}{suffix}", tmp_path / f"moved-away.db{suffix}")
        await wait_for(lambda: "missing" in app.ctx.banner, "missing banner")
        assert queue(app).query_one("Banner").display
        shutil.copy(backup, path)
        await wait_for(lambda: app.ctx.banner == "", "banner cleared")
        await wait_for(lambda: len(shown_ids(app)) == 1, "the restored file's rows")
        assert not queue(app).query_one("Banner").display


LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")  # holds the write lock, as a stuck writer would
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
conn.close()
"""


async def test_write_while_another_process_holds_the_lock_is_reported_then_works(
    make_app: AppFactory, db: Store, settings: Settings
) -> None:
    """In WAL mode readers are never blocked, so the screen stays live; a write that
    cannot get the lock is refused with a clear message, and works once it is free.
    (A short busy timeout: the write gives up after its retries, each a timeout long.)"""
    task_id = await add(db, "one", priority=5)
    app = make_app(busy_timeout_ms=200)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: shown_ids(app) == [task_id], "row")
        locker = subprocess.Popen(
            [sys.executable, "-c", LOCKER, str(settings.store.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert locker.stdout is not None
            assert locker.stdout.readline().strip() == "locked"
            await pilot.press("plus")
            await wait_for(lambda: any("locked" in n for n in notes(app)), "lock reported", timeout_s=90)
            assert app.is_running
        finally:
            assert locker.stdin is not None
            locker.stdin.write("\n")
            locker.stdin.close()
            locker.wait(timeout=30)
            assert locker.stdout is not None
            locker.stdout.close()
        assert (await db.get_task(task_id)).priority == 5
        await pilot.press("plus")
        await wait_for(lambda: table(app).tasks[task_id].priority == 4, "write works again")


async def test_unreadable_replacement_shows_banner_until_fixed(
    make_app: AppFactory, db: Store, settings: Settings, tmp_path: Path
) -> None:
    await add(db, "kept")
    good = tmp_path / "good.db"
    await db.backup(good)
    path = settings.store.path
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: len(shown_ids(app)) == 1, "row")
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{path}{suffix}").exists():
                os.rename(f"{path}{suffix}", tmp_path / f"old.db{suffix}")
        path.write_bytes(b"this is not a database" * 100)
        await wait_for(lambda: "cannot be opened" in app.ctx.banner, "banner names the problem")
        assert app.is_running
        os.replace(good, path)
        await wait_for(lambda: app.ctx.banner == "", "recovered")
        await wait_for(lambda: len(shown_ids(app)) == 1, "rows from the good file")


async def test_header_reports_dispatcher_states(make_app: AppFactory, db: Store, clock: object) -> None:
    from vigil.clock import ManualClock

    assert isinstance(clock, ManualClock)
    task_id = await add(db, "work")
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: queue(app).loads >= 1, "loaded")

        def loop_line() -> str:  # the loop's line, and a closed gate's line under it
            return f"{queue(app).query_one('#loop').render()}\n{queue(app).query_one('#gate').render()}"

        assert "not started: vigil run works through the queue" in loop_line()
        now = clock.now_ms()
        beat = DispatcherHeartbeat("h:1:x", 1, "h", now, now, "idle")
        await db.set_loop_values({HEARTBEAT_KEY: beat.to_json()})
        await wait_for(lambda: "idle, next due now" in loop_line(), "idle")
        # The running task comes from the tasks table (the claim), not the heartbeat.
        await db.claim_next(worker="h:1:x", lease_ms=600_000)
        clock.advance(65_000)
        now = clock.now_ms()
        await db.set_loop_values({HEARTBEAT_KEY: DispatcherHeartbeat("h:1:x", 1, "h", now, now, "idle").to_json()})
        await wait_for(lambda: f"running #{task_id} for 1m" in loop_line(), "running")
        await db.set_loop_values({"gate": {"state": "paused", "reason": "budget reached", "until": None}})
        await wait_for(lambda: "paused: budget reached" in loop_line(), "gate")
        clock.advance(10 * 60_000)
        await wait_for(lambda: "died: no heartbeat for 10m" in loop_line(), "stale heartbeat")
        assert f"still marked active: #{task_id}" in loop_line()
        beat = DispatcherHeartbeat("h:1:x", 1, "h", now, clock.now_ms(), "stopped")
        await db.set_loop_values({HEARTBEAT_KEY: beat.to_json(), "gate": {"state": "running"}})
        await wait_for(lambda: "stopped cleanly <1m ago" in loop_line(), "a clean stop is not a death")
        shown = queue(app).query_one(StatusHeader).loop_line
        stopped = shown.plain.index("stopped cleanly")
        assert str(shown.style) == "dim"  # quiet, not the red of a death
        assert not [span for span in shown.spans if span.start <= stopped < span.end and "red" in str(span.style)]


async def test_detail_pane_toggles(make_app: AppFactory, db: Store) -> None:
    await add(db, "a")
    app = make_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 1, "row")
        pane = queue(app).query_one(DetailPane)
        assert pane.display
        await wait_for(lambda: pane.shown is not None, "the highlighted task in the pane")
        assert pane.shown is not None
        assert pane.shown.id == table(app).current_id
        await pilot.press("i")
        assert not pane.display


async def test_a_failing_key_handler_is_shown_and_the_app_keeps_running(
    make_app: AppFactory, db: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tui import task_actions

    await add(db, "one")
    app = make_app()

    def boom(actions: object, action: object) -> None:
        raise RuntimeError("handler bug")

    monkeypatch.setattr(task_actions.TaskActions, "_split", boom)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(shown_ids(app)) == 1, "row")
        await pilot.press("d")
        await wait_for(lambda: any("handler bug" in n for n in notes(app)), "error shown")
        assert app.is_running
        await pilot.press("p")  # other keys still work
        assert "FROZEN" in str(queue(app).query_one("#badges").render())


def test_gate_shows_until_it_lifts_itself() -> None:
    from tui.header import loop_text
    from vigil.gate import GATE_KEY, GateState, LoopGate
    from vigil.liveness import loop_health

    now = 1_000_000_000
    beat = DispatcherHeartbeat("h:1:x", 1, "h", now, now, "idle").to_json()

    def line(gate: LoopGate) -> str:
        health = loop_health({HEARTBEAT_KEY: beat, GATE_KEY: gate.to_json()}, now, 15_000)
        return loop_text(health, None, now).plain

    assert "‖ loop backing off: usage limit (until in 10m)" in line(
        LoopGate(GateState.GATED, "usage limit", until=now + 600_000)
    )
    assert "‖ loop gated: auth" in line(LoopGate(GateState.GATED, "auth"))
    assert "‖" not in line(LoopGate(GateState.GATED, "usage limit", until=now - 1))
    assert "‖" not in line(LoopGate())
