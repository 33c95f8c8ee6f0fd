"""Contract: flood limits refuse exactly the insert that breaks them, count it, and
leave every other insert alone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.store.backends import open_backend
from tests.store.contract import all_tasks, assert_counts_match, new
from vigil.clock import MS_PER_DAY, ManualClock
from vigil.config import LimitsSettings
from vigil.errors import FloodLimited
from vigil.models import SensorRun
from vigil.store import Store

NO_LIMITS = LimitsSettings(max_depth=0, max_children=0, max_per_source_per_day=0, max_consecutive_failures=0)
Opener = Callable[[LimitsSettings], Awaitable[Store]]


@pytest.fixture
async def limited(backend: str, location: Path | str, clock: ManualClock) -> AsyncIterator[Opener]:
    stores: list[Store] = []

    async def open_with(limits: LimitsSettings) -> Store:
        store = await open_backend(backend, location, clock, limits=limits)
        stores.append(store)
        return store

    yield open_with
    for store in stores:
        await store.close()


async def _id(store: Store, subject: str = "task", **fields: object) -> int:
    result = await store.add_task(new(subject, **fields))
    assert result.task_id is not None
    return result.task_id


async def _rejected(store: Store) -> dict[str, object]:
    value = (await store.loop_values()).get("rejected_inserts", {"total": 0})
    assert isinstance(value, dict)
    return value


async def test_depth_limit_refuses_the_too_deep_follow_up_only(limited: Opener) -> None:
    store = await limited(replace(NO_LIMITS, max_depth=2))
    root = await _id(store, subject="root")
    child = await _id(store, subject="depth 1", parent_id=root)
    grandchild = await _id(store, subject="depth 2", parent_id=child)
    with pytest.raises(FloodLimited, match="max_depth = 2"):
        await store.add_task(new("depth 3", parent_id=grandchild, source="task:3"))
    assert await _id(store, subject="another depth 2", parent_id=child)  # the limit is on depth, not on the parent
    assert [t.subject for t in await all_tasks(store)] == ["another depth 2", "depth 2", "depth 1", "root"]
    rejected = await _rejected(store)
    assert (rejected["total"], rejected["last_source"]) == (1, "task:3")
    assert "max_depth" in str(rejected["last_reason"])
    await assert_counts_match(store)


async def test_children_limit_refuses_the_extra_child_only(limited: Opener) -> None:
    store = await limited(replace(NO_LIMITS, max_children=2))
    parent = await _id(store, subject="parent")
    other = await _id(store, subject="other parent")
    await _id(store, subject="c1", parent_id=parent)
    await _id(store, subject="c2", parent_id=parent)
    with pytest.raises(FloodLimited, match=f"task #{parent} already has 2 follow-ups"):
        await store.add_task(new("c3", parent_id=parent))
    assert await _id(store, subject="c1 of other", parent_id=other)
    assert len(await all_tasks(store)) == 5
    assert (await _rejected(store))["total"] == 1


async def test_per_source_limit_counts_a_rolling_day(limited: Opener, clock: ManualClock) -> None:
    limits = replace(NO_LIMITS, max_per_source_per_day=2, per_source={"sensor:chatty": 1})
    store = await limited(limits)
    await _id(store, subject="a1", source="sensor:feeds")
    clock.advance(3_600_000)
    await _id(store, subject="a2", source="sensor:feeds")
    with pytest.raises(FloodLimited, match="'sensor:feeds' already added 2 tasks"):
        await store.add_task(new("a3", source="sensor:feeds"))
    await _id(store, subject="b1", source="sensor:other")  # another source has its own count
    await _id(store, subject="c1", source="sensor:chatty")
    with pytest.raises(FloodLimited):
        await store.add_task(new("c2", source="sensor:chatty"))  # its own, lower cap
    for i in range(5):
        await _id(store, subject=f"by hand {i}", source="human")  # people are never limited
    clock.advance(MS_PER_DAY - 3_600_000 + 1)  # a1 has left the window, a2 has not
    await _id(store, subject="a3 later", source="sensor:feeds")
    with pytest.raises(FloodLimited):
        await store.add_task(new("a4", source="sensor:feeds"))
    assert (await _rejected(store))["total"] == 3


async def test_a_duplicate_is_ignored_not_rejected(limited: Opener) -> None:
    store = await limited(replace(NO_LIMITS, max_per_source_per_day=1))
    first = await _id(store, subject="one", source="sensor:s", source_key="k")
    again = await store.add_task(new("one again", source="sensor:s", source_key="k"))
    assert (again.created, again.task_id) == (False, first)
    assert (await _rejected(store))["total"] == 0


async def test_a_batch_counts_rejected_apart_from_ignored(limited: Opener) -> None:
    store = await limited(replace(NO_LIMITS, max_per_source_per_day=3))
    await _id(store, subject="held", source="sensor:s", source_key="dup")
    batch = await store.add_tasks(
        [new(f"t{i}", source="sensor:s", source_key=f"k{i}") for i in range(4)]
        + [new("dup", source="sensor:s", source_key="dup")],
        actor="sensor:s",
    )
    assert (batch.created, batch.ignored, batch.rejected) == (2, 1, 2)
    assert (await _rejected(store))["total"] == 2
    await assert_counts_match(store)


async def test_a_sensor_run_records_its_rejected_tasks(limited: Opener, clock: ManualClock) -> None:
    store = await limited(replace(NO_LIMITS, max_per_source_per_day=2))
    run = SensorRun(started_at=clock.now_ms(), duration_ms=5, status="ok")
    tasks = [new(f"item {i}", source="sensor:feeds", source_key=f"item-{i}") for i in range(5)]
    result = await store.record_sensor_run("feeds", run, tasks, {"cursor": 5})
    assert (result.created, result.ignored, result.rejected) == (2, 0, 3)
    [state] = await store.sensor_states()
    assert (state.created_last, state.ignored_last, state.rejected_last) == (2, 0, 3)
    assert state.state == {"cursor": 5}


async def test_without_limits_nothing_is_refused(limited: Opener) -> None:
    store = await limited(NO_LIMITS)
    parent = await _id(store, subject="p")
    for i in range(30):
        parent = await _id(store, subject=f"chain {i}", parent_id=parent, source="sensor:s")
    assert len(await all_tasks(store)) == 31
