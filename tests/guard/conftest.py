"""Fixtures of the guardrail tests: a guard factory whose alert hooks are drained at
teardown, so no hook process outlives its test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from dispatch.alerts import AlertHook
from dispatch.guard import Guard
from vigil.clock import ManualClock
from vigil.config import Settings
from vigil.store.sqlite import SqliteStore

GuardFactory = Callable[[Settings], tuple[Guard, AlertHook]]


@pytest.fixture
async def make_guard(store: SqliteStore, clock: ManualClock) -> AsyncIterator[GuardFactory]:
    hooks: list[AlertHook] = []

    def build(settings: Settings) -> tuple[Guard, AlertHook]:
        hook = AlertHook(settings.alerts, settings.home)
        hooks.append(hook)
        return Guard(store, settings, clock, hook), hook

    yield build
    for hook in hooks:
        await hook.drain()
