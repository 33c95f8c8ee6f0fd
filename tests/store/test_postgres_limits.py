"""PostgreSQL: flood limits hold when several sessions insert at once (as dispatchers
and sensors on several hosts would): no two pass a limit together, and every
refusal is counted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from vigil.clock import ManualClock
from vigil.config import LimitsSettings
from vigil.errors import FloodLimited
from vigil.models import NewTask
from vigil.store.postgres import PostgresStore

SESSIONS = 6
TRIES = 4


@pytest.fixture
async def stores(postgres_migrated_url: str, clock: ManualClock) -> AsyncIterator[list[PostgresStore]]:
    limits = LimitsSettings(max_depth=0, max_children=5, max_per_source_per_day=7)
    opened = [await PostgresStore.open(postgres_migrated_url, clock=clock, limits=limits) for _ in range(SESSIONS)]
    yield opened
    for store in opened:
        await store.close()


async def _rejected_total(store: PostgresStore) -> object:
    value = (await store.loop_values()).get("rejected_inserts", {})
    assert isinstance(value, dict)
    return value.get("total")


async def test_the_children_limit_holds_across_sessions(stores: list[PostgresStore]) -> None:
    parent = await stores[0].add_task(NewTask("parent"))
    assert parent.task_id is not None

    async def add_follow_ups(store: PostgresStore) -> int:
        added = 0
        for n in range(TRIES):
            try:
                await store.add_task(NewTask(f"follow-up {n}", parent_id=parent.task_id), actor="agent")
                added += 1
            except FloodLimited:
                pass
        return added

    added = await asyncio.gather(*(add_follow_ups(s) for s in stores))

    assert sum(added) == 5
    assert await _rejected_total(stores[0]) == SESSIONS * TRIES - 5


async def test_the_per_source_limit_holds_across_sessions_in_batches(stores: list[PostgresStore]) -> None:
    batch = [NewTask(f"entry {n}", source="sensor:feeds") for n in range(TRIES)]

    results = await asyncio.gather(*(s.add_tasks(batch, actor="sensor:feeds") for s in stores))

    assert sum(r.created for r in results) == 7
    assert sum(r.rejected for r in results) == SESSIONS * TRIES - 7
    assert await _rejected_total(stores[0]) == SESSIONS * TRIES - 7
