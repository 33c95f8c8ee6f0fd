"""TUI fixtures: a real home and SQLite file, the real app under Pilot, a manual clock.

The app opens its own connection (as it does in production); tests change the
database through a second connection (``db``) or a real ``vigil`` subprocess, as
another process would, so every change reaches the app through its
``data_version`` probe.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tui.app import VigilApp
from vigil.clock import ManualClock, SystemClock
from vigil.config import Settings, load_settings
from vigil.models import NewTask
from vigil.store import Store, open_store

PROBE_S = 0.05
WAIT_S = 15.0  # safety net only: a condition that never holds fails the test here


@pytest.fixture
def settings(home: Path) -> Settings:
    return load_settings(home)


@pytest.fixture
def clock() -> ManualClock:
    """Frozen an hour ahead of the wall clock, so tasks that a `vigil` subprocess adds
    (stamped with the real time) are due for the app and for `db`."""
    return ManualClock(SystemClock().now_ms() + 3_600_000)


@pytest.fixture
async def db(settings: Settings, clock: ManualClock) -> AsyncIterator[Store]:
    """A second connection to the app's database: "another process"."""
    store = await open_store(settings, clock)
    yield store
    await store.close()


AppFactory = Callable[..., VigilApp]


@pytest.fixture
def make_app(settings: Settings, clock: ManualClock) -> AppFactory:
    def make(
        *,
        readonly: bool = False,
        probe_interval_s: float = PROBE_S,
        busy_timeout_ms: int | None = None,
        sensors: tuple[dict[str, object], ...] | None = None,
    ) -> VigilApp:
        """The app on the test home; ``busy_timeout_ms`` replaces the home's ``[store]
        busy_timeout`` (how long its writes wait for another process's lock),
        ``sensors`` its ``[[sensors]]`` tables."""
        app_settings = settings if sensors is None else replace(settings, sensors=sensors)
        if busy_timeout_ms is not None:
            app_settings = replace(app_settings, store=replace(settings.store, busy_timeout_ms=busy_timeout_ms))
        return VigilApp(
            app_settings,
            opener=lambda: open_store(app_settings, clock),
            clock=clock,
            readonly=readonly,
            probe_interval_s=probe_interval_s,
        )

    return make


async def wait_for(condition: Callable[[], object], what: str, timeout_s: float = WAIT_S) -> None:
    """Let the app run until ``condition()`` is true (polling, no wall-clock assertion)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        await asyncio.sleep(0.02)


async def add(db: Store, subject: str, **fields: object) -> int:
    result = await db.add_task(NewTask(subject, **fields))  # type: ignore[arg-type]
    assert result.task_id is not None
    return result.task_id
