"""SVG snapshots of the main screens (frozen clock, fixed data, no blinking cursor).

Update after an intended change with ``pytest tests/tui/test_snapshots.py
--snapshot-update`` and review the SVGs. Textual is pinned tightly in pyproject so
that a Textual release cannot change them silently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

import tui.app
from tui.app import VigilApp
from vigil.clock import ManualClock
from vigil.config import Settings, load_settings
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat, NewTask, Outcome, OutcomeKind, TaskStatus
from vigil.store import open_store

pytestmark = pytest.mark.slow

FROZEN_MS = 1_767_225_600_000 + 9 * 3_600_000  # 2026-01-01T09:00Z
Compare = Callable[..., bool]


async def _seed(settings: Settings, clock: ManualClock) -> None:
    store = await open_store(settings, clock)
    try:
        clock.set(FROZEN_MS - 3 * 3_600_000)
        done = await store.add_task(NewTask("summarise yesterday's inbox", skills=("email",), source="sensor:inbox"))
        claim = await store.claim_next(worker="w", lease_ms=60_000)
        assert claim is not None
        clock.advance(120_000)
        outcome = Outcome(OutcomeKind.SUCCESS, summary="3 threads", cost_usd=0.42, tokens_in=12_000, tokens_out=900)
        await store.record(claim, outcome, worker="w")
        assert done.task_id is not None
        clock.set(FROZEN_MS - 600_000)
        await store.add_task(NewTask("fix the flaky [bold]deploy[/] check", priority=2, skills=("ci", "git")))
        await store.add_task(NewTask("answer issue #88 😀", priority=4, source="sensor:github"))
        await store.add_task(NewTask("weekly report", priority=1, scheduled_for=FROZEN_MS + 7_200_000))
        await store.add_task(NewTask("tidy the wiki", priority=7))
        running = await store.add_task(NewTask("refactor the parser", priority=3, skills=("python",)))
        clock.set(FROZEN_MS - 200_000)
        await store.claim_next(worker="w", lease_ms=600_000)
        failed = await store.add_task(NewTask("renew the certificate", priority=2))
        assert failed.task_id is not None
        assert running.task_id is not None
        await store.close_task(failed.task_id, TaskStatus.FAILED, "permission denied", actor="agent")
        beat = DispatcherHeartbeat("host:1:abc", 1, "host", FROZEN_MS - 3_600_000, FROZEN_MS - 5_000, "running")
        beat = DispatcherHeartbeat(**{**beat.to_json(), "task_id": 2, "task_started_at": FROZEN_MS - 200_000})  # type: ignore[arg-type]
        await store.set_loop_values({HEARTBEAT_KEY: beat.to_json()})
    finally:
        await store.close()


@pytest.fixture
def snap_app(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> VigilApp:
    # The home is a temporary folder: a fixed name in the tab bar instead.
    monkeypatch.setattr(tui.app, "home_label", lambda home: "~/agent")
    # A fixed zone, so that local times and days do not depend on the machine.
    with (settings.home / "vigil.toml").open("a") as toml:
        toml.write('\n[tui]\ntimezone = "America/New_York"\n')
    settings = load_settings(settings.home)
    clock = ManualClock(FROZEN_MS)
    asyncio.run(_seed(settings, clock))
    clock.set(FROZEN_MS)
    return VigilApp(settings, opener=lambda: open_store(settings, clock), clock=clock, probe_interval_s=0.05)


def loaded(screen_name: str, *keys: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, VigilApp)
        for _ in range(500):
            if hasattr(app, "ctx") and app.queue_screen.loads >= 1:
                break
            await asyncio.sleep(0.01)
        if keys:
            await pilot.press(*keys)
        screen = app.screen
        for _ in range(500):
            if getattr(screen, "loads", 1) >= 1 and type(screen).__name__ == screen_name:
                break
            await asyncio.sleep(0.01)
            screen = app.screen
        await pilot.pause(0.1)

    return run_before


def test_queue_screen(snap_compare: Compare, snap_app: VigilApp) -> None:
    assert snap_compare(snap_app, terminal_size=(130, 24), run_before=loaded("QueueScreen"))


def test_queue_screen_at_80x24(snap_compare: Compare, snap_app: VigilApp) -> None:
    assert snap_compare(snap_app, terminal_size=(80, 24), run_before=loaded("QueueScreen"))


def test_task_screen(snap_compare: Compare, snap_app: VigilApp) -> None:
    assert snap_compare(snap_app, terminal_size=(110, 40), run_before=loaded("TaskScreen", "down", "enter"))


def test_history_screen(snap_compare: Compare, snap_app: VigilApp) -> None:
    assert snap_compare(snap_app, terminal_size=(110, 24), run_before=loaded("HistoryScreen", "3"))


def test_costs_screen(snap_compare: Compare, snap_app: VigilApp, tmp_path: Path) -> None:
    assert snap_compare(snap_app, terminal_size=(110, 30), run_before=loaded("CostsScreen", "5"))


# The footer (Help and Quit always at its end), the help and the palette, at the
# smallest supported terminal and a large one.
SIZES = pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])


def test_queue_screen_at_160x45(snap_compare: Compare, snap_app: VigilApp) -> None:
    assert snap_compare(snap_app, terminal_size=(160, 45), run_before=loaded("QueueScreen"))


@SIZES
def test_help(snap_compare: Compare, snap_app: VigilApp, size: tuple[int, int]) -> None:
    assert snap_compare(snap_app, terminal_size=size, run_before=loaded("HelpScreen", "question_mark"))


@SIZES
def test_palette(snap_compare: Compare, snap_app: VigilApp, size: tuple[int, int]) -> None:
    async def typed(pilot: Pilot[Any]) -> None:
        await loaded("CommandPalette", "ctrl+p")(pilot)
        pilot.app.screen.query_one(Input).cursor_blink = False  # a blinking cursor is not deterministic
        await pilot.press(*"de")
        await pilot.pause(0.3)  # the palette searches in a worker

    assert snap_compare(snap_app, terminal_size=size, run_before=typed)
