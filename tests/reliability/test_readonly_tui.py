"""``vigil tui --readonly`` cannot write: every write key on every screen, then the
database file's bytes and every row are what they were before."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from tests.tui.conftest import wait_for
from tui import tui_settings
from tui.app import VigilApp
from vigil.clock import ManualClock, SystemClock
from vigil.config import load_settings
from vigil.models import NewTask, TaskStatus
from vigil.store import open_store

pytestmark = pytest.mark.slow

WRITE_KEYS = (
    "n",
    "plus",
    "equals_sign",
    "minus",
    "d",
    "x",
    "r",
    "e",
    "space",
    "y",
    "ctrl+s",
    "m",
    "left_square_bracket",
    "right_square_bracket",
)
SCREENS = ("1", "2", "3", "4", "5")


def snapshot(db: Path) -> tuple[str, list[str]]:
    """The file's digest and a dump of every row (read through a read-only URI)."""
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        dump = list(conn.iterdump())
    conn.close()
    return digest, dump


async def test_readonly_tui_changes_nothing_whatever_is_pressed(home: Path) -> None:
    settings = tui_settings(load_settings(home))
    clock = ManualClock(SystemClock().now_ms() + 3_600_000)
    store = await open_store(settings, clock)
    try:
        ids = []
        for subject in ("pending one", "pending two", "will fail", "needs approval"):
            added = await store.add_task(NewTask(subject, requires_approval=subject == "needs approval"))
            assert added.task_id is not None
            ids.append(added.task_id)
        await store.close_task(ids[2], TaskStatus.FAILED, "broke", actor="agent")
        await store.checkpoint()
    finally:
        await store.close()
    before = snapshot(settings.store.path)

    app = VigilApp(settings, opener=lambda: open_store(settings, clock), clock=clock, readonly=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(lambda: len(app.queue_screen.query("DataTable")) > 0, "queue table")
        for screen in SCREENS:
            await pilot.press(screen)
            await pilot.pause()
            for key in WRITE_KEYS:
                await pilot.press(key)
                await pilot.pause()
            await pilot.press("enter")  # open whatever row the cursor is on
            await pilot.pause()
            for key in WRITE_KEYS:
                await pilot.press(key)
            await pilot.press("escape", "escape")
            await pilot.pause()
        await pilot.press("ctrl+q")
    after = snapshot(settings.store.path)
    assert after[1] == before[1]  # every row
    assert after[0] == before[0]  # and the file's bytes
