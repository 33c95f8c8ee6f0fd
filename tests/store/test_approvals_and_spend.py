"""Contract: approvals, holding a claimed task for approval, the urgency-limited
claim, the rolling spend and the conditional loop-state write."""

from __future__ import annotations

import pytest

from tests.store.contract import NO_BACKOFF, assert_counts_match, claim, new, success
from vigil.clock import ManualClock
from vigil.errors import InputError, InvalidTransition, TaskNotFound
from vigil.models import ApprovalState, Outcome, OutcomeKind, TaskStatus
from vigil.store import Store


async def _awaiting(store: Store, subject: str = "delete the old bucket") -> int:
    result = await store.add_task(new(subject, requires_approval=True))
    assert result.task_id is not None
    return result.task_id


async def test_a_task_requiring_approval_is_added_blocked_and_never_claimed(store: Store) -> None:
    task_id = await _awaiting(store)
    task = await store.get_task(task_id)
    assert (task.status, task.approval, task.awaiting_approval) == (TaskStatus.BLOCKED, ApprovalState.PENDING, True)
    assert await store.claim_next(worker="w1", lease_ms=60_000) is None
    await assert_counts_match(store)


async def test_approve_makes_it_claimable_and_is_audited(store: Store) -> None:
    task_id = await _awaiting(store)
    approved = await store.approve(task_id, actor="human")
    assert (approved.status, approved.approval) == (TaskStatus.PENDING, ApprovalState.APPROVED)
    assert (await claim(store)).task.id == task_id
    kinds = [(e.actor, e.kind, e.from_value, e.to_value) for e in await store.list_events(task_id)]
    assert ("human", "approval", "pending", "approved") in kinds
    assert ("human", "status", "blocked", "pending") in kinds


async def test_reject_cancels_with_the_reason_audited(store: Store) -> None:
    task_id = await _awaiting(store)
    rejected = await store.reject(task_id, "too risky on a Friday", actor="human")
    assert (rejected.status, rejected.approval) == (TaskStatus.CANCELED, ApprovalState.REJECTED)
    assert rejected.result_summary == "rejected: too risky on a Friday"
    approval_events = [e for e in await store.list_events(task_id) if e.kind == "approval"]
    assert [(e.to_value, e.detail) for e in approval_events] == [("rejected", "rejected: too risky on a Friday")]
    await assert_counts_match(store)


async def test_approve_or_reject_refuses_a_task_not_awaiting_approval(store: Store) -> None:
    plain = await store.add_task(new("ordinary"))
    assert plain.task_id is not None
    with pytest.raises(InvalidTransition, match="not awaiting approval"):
        await store.approve(plain.task_id, actor="human")
    with pytest.raises(InvalidTransition, match="not awaiting approval"):
        await store.reject(plain.task_id, "no", actor="human")
    task_id = await _awaiting(store)
    await store.approve(task_id, actor="human")
    with pytest.raises(InvalidTransition):
        await store.approve(task_id, actor="human")  # twice: the second finds it pending
    with pytest.raises(TaskNotFound):
        await store.approve(999, actor="human")
    with pytest.raises(InputError, match="reason"):
        await store.reject(task_id, "  ", actor="human")


async def test_retrying_a_rejected_task_asks_for_approval_again(store: Store) -> None:
    task_id = await _awaiting(store)
    await store.reject(task_id, "not now", actor="human")
    again = await store.retry(task_id, actor="human")
    assert (again.status, again.approval) == (TaskStatus.BLOCKED, ApprovalState.PENDING)
    assert await store.claim_next(worker="w1", lease_ms=60_000) is None


async def test_holding_for_approval_puts_a_claimed_task_back_unrun(store: Store) -> None:
    added = await store.add_task(new("uses a skill that needs approval"))
    got = await claim(store)
    held = await store.put_back(got, worker="w1", until=None)
    assert (held.status, held.approval, held.attempt_count) == (TaskStatus.BLOCKED, ApprovalState.PENDING, 0)
    assert held.claimed_by is None
    assert await store.list_runs(got.task.id) == []
    assert await store.claim_next(worker="w1", lease_ms=60_000) is None
    await store.approve(got.task.id, actor="human")
    again = await claim(store)
    assert (again.task.id, again.attempt) == (added.task_id, 1)
    await assert_counts_match(store)


async def test_putting_back_refuses_a_task_the_worker_no_longer_holds(store: Store) -> None:
    await store.add_task(new("x"))
    got = await claim(store)
    await store.record(got, success(), worker="w1")
    with pytest.raises(InvalidTransition):
        await store.put_back(got, worker="w1", until=None)


async def test_claim_with_max_priority_takes_only_urgent_tasks(store: Store) -> None:
    await store.add_task(new("routine", priority=5))
    urgent = await store.add_task(new("urgent", priority=2))
    assert await store.claim_next(worker="w1", lease_ms=60_000, max_priority=1) is None
    got = await store.claim_next(worker="w1", lease_ms=60_000, max_priority=2)
    assert got is not None
    assert got.task.id == urgent.task_id
    with pytest.raises(InputError):
        await store.claim_next(worker="w1", lease_ms=60_000, max_priority=0)


async def test_spend_since_sums_runs_finished_in_the_window(store: Store, clock: ManualClock) -> None:
    assert await store.spend_since(0) == 0.0
    for cost in (1.25, 2.0):
        await store.add_task(new(f"costs {cost}"))
        got = await claim(store)
        await store.record(got, success(cost_usd=cost), worker="w1")
        clock.advance(3_600_000)
    await store.add_task(new("limited"))
    got = await claim(store)
    await store.record(got, Outcome(OutcomeKind.USAGE_LIMITED, cost_usd=0.5, retry_at=clock.now_ms()), worker="w1")
    now = clock.now_ms()
    assert await store.spend_since(now - 3 * 3_600_000) == pytest.approx(3.75)
    assert await store.spend_since(now - 3_600_000) == pytest.approx(2.5)  # the first run is outside
    assert await store.spend_since(now + 1) == 0.0


async def test_replace_loop_value_writes_only_over_the_expected_value(store: Store) -> None:
    assert await store.replace_loop_value("gate", None, {"state": "paused"})
    assert not await store.replace_loop_value("gate", None, {"state": "running"})
    assert not await store.replace_loop_value("gate", {"state": "gated"}, {"state": "running"})
    assert (await store.loop_values())["gate"] == {"state": "paused"}
    assert await store.replace_loop_value("gate", {"state": "paused"}, {"state": "running"})
    assert (await store.loop_values())["gate"] == {"state": "running"}


async def test_the_dispatcher_s_own_retry_keeps_the_approval(store: Store, clock: ManualClock) -> None:
    task_id = await _awaiting(store)
    await store.approve(task_id, actor="human")
    got = await claim(store)
    transient = Outcome(OutcomeKind.TRANSIENT, error="overloaded")
    again = (await store.record(got, transient, worker="w1", policy=NO_BACKOFF)).task
    assert (again.status, again.approval) == (TaskStatus.PENDING, ApprovalState.APPROVED)
    assert (await claim(store)).task.id == task_id


async def test_origin_of_follows_the_parent_chain_to_its_root(store: Store) -> None:
    root = await store.add_task(new("feed entry", source="sensor:feeds"))
    assert root.task_id is not None
    child = await store.add_task(new("follow-up", source=f"task:{root.task_id}", parent_id=root.task_id))
    assert child.task_id is not None
    grandchild = await store.add_task(new("deeper", source=f"task:{child.task_id}", parent_id=child.task_id))
    assert grandchild.task_id is not None
    by_hand = await store.add_task(new("by hand"))
    assert by_hand.task_id is not None
    assert [await store.origin_of(t) for t in (root.task_id, child.task_id, grandchild.task_id)] == ["sensor:feeds"] * 3
    assert await store.origin_of(by_hand.task_id) == "human"
    with pytest.raises(TaskNotFound):
        await store.origin_of(999)


async def test_putting_back_until_later_releases_a_claimed_task_unrun(store: Store, clock: ManualClock) -> None:
    added = await store.add_task(new("over its sensor's budget"))
    got = await claim(store)
    later = clock.now_ms() + 3_600_000
    released = await store.put_back(got, worker="w1", until=later)
    assert (released.status, released.scheduled_for, released.attempt_count) == (TaskStatus.PENDING, later, 0)
    assert released.claimed_by is None
    assert await store.list_runs(got.task.id) == []
    assert await store.claim_next(worker="w1", lease_ms=60_000) is None
    with pytest.raises(InvalidTransition):
        await store.put_back(got, worker="w1", until=later)  # no longer held
    clock.set(later)
    again = await claim(store)
    assert (again.task.id, again.attempt) == (added.task_id, 1)
    await assert_counts_match(store)
