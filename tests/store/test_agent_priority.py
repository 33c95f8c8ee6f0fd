"""Contract: an agent's task cannot jump the queue (issue 37, item 2). It is never
more urgent than its parent nor than ``[limits] agent_priority_floor``, decided in
the transaction that inserts it and said in the result; a person's is left as
asked. Over the daily budget the claim takes only tasks a person made urgent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tests.store.backends import open_backend
from tests.store.contract import new
from vigil.clock import ManualClock
from vigil.config import LimitsSettings
from vigil.store import Store

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


async def _id(store: Store, subject: str, *, actor: str = "human", **fields: object) -> int:
    result = await store.add_task(new(subject, **fields), actor=actor)
    assert result.task_id is not None
    return result.task_id


async def test_an_agents_follow_up_is_never_more_urgent_than_its_parent(limited: Opener) -> None:
    store = await limited(LimitsSettings())
    parent = await _id(store, "the person's task", priority=5)
    added = await store.add_task(
        new("jump the queue", priority=1, parent_id=parent, source=f"task:{parent}"), actor="agent"
    )
    assert added.task_id is not None
    assert (await store.get_task(added.task_id)).priority == 5
    assert added.clamped == (
        "priority 5, not 1: a task an agent adds is never more urgent than its parent or [limits] "
        f"agent_priority_floor (its parent, task #{parent}, has priority 5)"
    )
    calmer = await store.add_task(new("later", priority=7, parent_id=parent), actor="agent")
    assert calmer.clamped is None
    assert calmer.task_id is not None
    assert (await store.get_task(calmer.task_id)).priority == 7
    # a person's follow-up is theirs to rank
    person = await store.add_task(new("now", priority=1, parent_id=parent), actor="human")
    assert person.clamped is None
    assert person.task_id is not None
    assert (await store.get_task(person.task_id)).priority == 1


async def test_the_floor_holds_an_agents_tasks_below_it(limited: Opener) -> None:
    store = await limited(LimitsSettings(agent_priority_floor=3))
    parent = await _id(store, "the person's urgent task", priority=1)
    added = await store.add_task(new("urgent too", priority=1, parent_id=parent), actor="agent")
    assert added.task_id is not None
    assert (await store.get_task(added.task_id)).priority == 3
    assert added.clamped is not None
    assert added.clamped.endswith("([limits] agent_priority_floor = 3)")
    # a batch an agent adds is held the same way
    batch = await store.add_tasks([new("one", priority=1, parent_id=parent), new("two", priority=6)], actor="agent")
    assert [(await store.get_task(i)).priority for i in batch.created_ids] == [3, 6]


async def test_over_the_budget_only_a_persons_urgent_tasks_are_claimed(limited: Opener) -> None:
    store = await limited(LimitsSettings())
    person = await _id(store, "the person's urgent task", priority=1)
    follow_up = await _id(store, "the agent's urgent follow-up", actor="agent", priority=1, parent_id=person)
    sensor = await _id(store, "a sensor's urgent task", actor="sensor:feeds", priority=1, source="sensor:feeds")
    raised = await _id(store, "raised by a person", actor="sensor:feeds", priority=2, source="sensor:feeds")
    await store.set_priority(raised, 1, actor="human (browser session 3f2a)")
    claimed = []
    while (claim := await store.claim_next(worker="w", lease_ms=60_000, max_priority=1, by_person=True)) is not None:
        claimed.append(claim.task.id)
    assert claimed == [person, raised]
    # a person raising the agent's follow-up makes it theirs
    await store.set_priority(follow_up, 2, actor="human")
    await store.set_priority(follow_up, 1, actor="human")
    claim = await store.claim_next(worker="w", lease_ms=60_000, max_priority=1, by_person=True)
    assert claim is not None
    assert claim.task.id == follow_up
    # within the budget anyone's task is claimed, in order
    claim = await store.claim_next(worker="w", lease_ms=60_000)
    assert claim is not None
    assert claim.task.id == sensor
