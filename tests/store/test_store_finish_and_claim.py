"""Contract: finish one task and claim the next in one transaction."""

from __future__ import annotations

import pytest

from tests.store.contract import assert_counts_match, claim, new, success
from vigil.clock import ManualClock
from vigil.errors import InputError
from vigil.models import TaskStatus
from vigil.store import Store


async def test_finishes_and_claims_the_next_in_order(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("first", priority=1))
    await store.add_task(new("later", priority=2, scheduled_for=clock.now_ms() + 60_000))
    await store.add_task(new("third", priority=5))
    current = await claim(store, "w1")

    finished, nxt = await store.finish_and_claim(
        current, success(summary="done", cost_usd=0.5), TaskStatus.COMPLETED, worker="w1", lease_ms=30_000
    )

    assert (finished.id, finished.status, finished.result_summary) == (current.task.id, TaskStatus.COMPLETED, "done")
    assert finished.cost_usd == 0.5
    assert finished.claimed_by is None
    assert nxt is not None
    assert nxt.task.subject == "third"
    assert (nxt.task.status, nxt.task.claimed_by, nxt.attempt) == (TaskStatus.ACTIVE, "w1", 1)
    assert nxt.task.lease_until == clock.now_ms() + 30_000
    assert [r.id for r in await store.open_runs()] == [nxt.run_id]
    await assert_counts_match(store)


async def test_nothing_due_finishes_and_returns_no_claim(store: Store) -> None:
    await store.add_task(new("only"))
    current = await claim(store, "w1")

    finished, nxt = await store.finish_and_claim(current, success(), TaskStatus.FAILED, worker="w1", lease_ms=1000)

    assert finished.status is TaskStatus.FAILED
    assert nxt is None
    assert await store.open_runs() == []


async def test_a_completed_dependency_is_claimable_in_the_same_transaction(store: Store) -> None:
    first = await store.add_task(new("first"))
    await store.add_task(new("needs first", depends_on=(first.task_id,)))
    current = await claim(store, "w1")

    _, nxt = await store.finish_and_claim(current, success(), TaskStatus.COMPLETED, worker="w1", lease_ms=1000)

    assert nxt is not None
    assert nxt.task.subject == "needs first"


async def test_keeps_the_status_the_agent_gave(store: Store) -> None:
    await store.add_task(new("a"))
    current = await claim(store, "w1")
    await store.close_task(current.task.id, TaskStatus.BLOCKED, "waiting for a person", actor="agent")

    finished, _ = await store.finish_and_claim(current, success(), TaskStatus.COMPLETED, worker="w1", lease_ms=1000)

    assert finished.status is TaskStatus.BLOCKED
    assert finished.result_summary == "waiting for a person"
    assert finished.claimed_by is None


async def test_a_bad_status_changes_nothing(store: Store) -> None:
    await store.add_task(new("a"))
    await store.add_task(new("b"))
    current = await claim(store, "w1")

    with pytest.raises(InputError):
        await store.finish_and_claim(current, success(), TaskStatus.PENDING, worker="w1", lease_ms=1000)

    assert (await store.get_task(current.task.id)).status is TaskStatus.ACTIVE
    assert len(await store.open_runs()) == 1
