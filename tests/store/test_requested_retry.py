"""Contract: ``request_retry``, a running task asking to be tried again later."""

from __future__ import annotations

import pytest

from tests.store.contract import claim, new, success
from vigil.clock import ManualClock
from vigil.errors import InvalidTransition
from vigil.models import Outcome, OutcomeKind, TaskStatus
from vigil.store import Store


async def test_a_running_task_goes_back_to_pending_at_its_time(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("wait for the release", max_retries=2))
    c = await claim(store)
    retry_at = clock.now_ms() + 3_600_000
    asked = await store.request_retry(c.task.id, retry_at, "not out yet", actor="agent")
    assert (asked.status, asked.scheduled_for, asked.attempt_count) == (TaskStatus.PENDING, retry_at, 1)
    assert asked.result_summary == "not out yet"
    assert await store.claim_next(worker="w2", lease_ms=60_000) is None  # not due yet

    # The dispatcher then records the run: the status the agent chose is kept.
    done = (await store.record(c, success(cost_usd=0.5), worker="w1")).task
    assert (done.status, done.claimed_by, done.cost_usd) == (TaskStatus.PENDING, None, 0.5)
    events = [(e.actor, e.from_value, e.to_value) for e in await store.list_events(c.task.id) if e.kind == "status"]
    assert events == [("dispatcher", "pending", "active"), ("agent", "active", "pending")]

    clock.advance(3_600_000)
    again = await claim(store, "w2")
    assert (again.task.id, again.task.attempt_count) == (c.task.id, 2)


async def test_with_no_retry_left_it_fails_for_good(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("one shot", max_retries=0))
    c = await claim(store)
    failed = await store.request_retry(c.task.id, clock.now_ms() + 60_000, "not out yet", actor="agent")
    assert failed.status is TaskStatus.FAILED
    assert failed.completed_at == clock.now_ms()
    assert failed.result_summary == "gave up after 1 attempt: not out yet"


async def test_only_a_running_task_without_a_cancel_request_may_ask(store: Store, clock: ManualClock) -> None:
    result = await store.add_task(new("pending"))
    assert result.task_id is not None
    with pytest.raises(InvalidTransition, match="is pending, cannot ask for a retry"):
        await store.request_retry(result.task_id, clock.now_ms(), "later", actor="agent")
    c = await claim(store)
    await store.cancel(c.task.id, actor="human")
    with pytest.raises(InvalidTransition, match="is active with a cancel requested"):
        await store.request_retry(c.task.id, clock.now_ms(), "later", actor="agent")


async def test_no_second_run_starts_while_the_asking_run_is_still_open(store: Store, clock: ManualClock) -> None:
    """With lanes, another dispatcher must not claim the task while the run that
    asked for the retry is still ending, even once the retry time has come."""
    await store.add_task(new("retry at once", max_retries=2))
    c = await claim(store)
    asked = await store.request_retry(c.task.id, clock.now_ms(), "again, now", actor="agent")
    clock.advance(60_000)
    assert await store.claim_next(worker="w2", lease_ms=60_000) is None
    assert await store.next_due_at() is None  # an idle lane sleeps until the run ends

    await store.record(c, success(), worker="w1")
    assert await store.next_due_at() == asked.scheduled_for
    again = await claim(store, "w2")
    assert (again.task.id, again.attempt) == (c.task.id, 2)


async def test_the_task_of_a_dead_asking_run_is_claimable_once_recovered(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("retry, then the dispatcher dies", max_retries=2))
    c = await claim(store)
    asked = await store.request_retry(c.task.id, clock.now_ms(), "again, now", actor="agent")
    assert await store.claim_next(worker="w2", lease_ms=60_000) is None

    died = Outcome(OutcomeKind.INTERRUPTED, summary="interrupted: dispatcher died", error="dispatcher died")
    recovered = await store.recover(c.run_id, died)  # its agent's request stands
    assert (recovered.status, recovered.claimed_by, recovered.scheduled_for) == (
        TaskStatus.PENDING,
        None,
        asked.scheduled_for,
    )
    assert await store.next_due_at() == asked.scheduled_for
    again = await claim(store, "w2")
    assert (again.task.id, again.attempt) == (c.task.id, 2)
