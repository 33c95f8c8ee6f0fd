"""Contract: a run that succeeded with refused actions holds its task for a
person's review; approve completes it, reject puts it back with the reason as a
note; a cancel requested meanwhile wins; the agent's own close stands; what waits
for a person is counted."""

from __future__ import annotations

import pytest

from tests.store.contract import assert_counts_match, claim, new
from vigil.errors import InvalidTransition
from vigil.models import ApprovalState, Outcome, OutcomeKind, TaskStatus
from vigil.store import Store

DENIED = Outcome(
    OutcomeKind.SUCCESS,
    summary="cleaned what I could",
    cost_usd=0.25,
    tokens_in=100,
    permission_denials=('Write: {"file_path": "/home/agent/vigil.toml"}', "Bash: vigil resume (denied)"),
)


async def _held(store: Store) -> int:
    added = await store.add_task(new("clean up"))
    assert added.task_id is not None
    held = (await store.record(await claim(store), DENIED, worker="w1")).task
    assert held.id == added.task_id
    return held.id


async def test_a_held_task_is_blocked_awaiting_review_with_its_run_recorded(store: Store) -> None:
    task_id = await _held(store)
    task = await store.get_task(task_id)
    assert (task.status, task.review, task.awaiting_review) == (TaskStatus.BLOCKED, ApprovalState.PENDING, True)
    assert not task.awaiting_approval
    assert (task.result_summary, task.cost_usd, task.tokens_in, task.denials) == ("cleaned what I could", 0.25, 100, 2)
    assert task.claimed_by is None
    (run,) = await store.list_runs(task_id)
    assert (run.outcome, run.permission_denials) == ("success", DENIED.permission_denials)
    events = [(e.actor, e.kind, e.to_value) for e in await store.list_events(task_id)]
    assert ("dispatcher", "review", "pending") in events
    assert await store.claim_next(worker="w1", lease_ms=60_000) is None  # never claimed while it waits
    await assert_counts_match(store)


async def test_approving_a_review_completes_the_task(store: Store) -> None:
    task_id = await _held(store)
    approved = await store.approve(task_id, actor="human")
    assert (approved.status, approved.review, approved.completed_at is not None) == (
        TaskStatus.COMPLETED,
        ApprovalState.APPROVED,
        True,
    )
    events = [(e.actor, e.kind, e.from_value, e.to_value) for e in await store.list_events(task_id)]
    assert ("human", "review", "pending", "approved") in events
    with pytest.raises(InvalidTransition, match="not awaiting approval or review"):
        await store.approve(task_id, actor="human")
    await assert_counts_match(store)


async def test_rejecting_a_review_requeues_it_now_with_the_reason_for_its_agent(store: Store) -> None:
    task_id = await _held(store)
    rejected = await store.reject(task_id, "do not touch vigil.toml", actor="human")
    assert (rejected.status, rejected.review, rejected.attempt_count) == (TaskStatus.PENDING, ApprovalState.REJECTED, 1)
    assert [(n.author, n.text) for n in await store.list_notes(task_id)] == [
        ("human", "review: do not touch vigil.toml")
    ]
    assert (await claim(store)).task.id == task_id  # due at once
    await assert_counts_match(store)


async def test_a_cancel_requested_meanwhile_wins_over_the_review(store: Store) -> None:
    added = await store.add_task(new("clean up"))
    assert added.task_id is not None
    claimed = await claim(store)
    await store.cancel(added.task_id, actor="human")  # active: a request
    held = (await store.record(claimed, DENIED, worker="w1")).task
    assert (held.status, held.review) == (TaskStatus.CANCELED, None)
    await assert_counts_match(store)


async def test_the_agents_own_close_stands(store: Store) -> None:
    added = await store.add_task(new("clean up"))
    assert added.task_id is not None
    claimed = await claim(store)
    await store.close_task(added.task_id, TaskStatus.COMPLETED, "done, some refusals were expected", actor="agent")
    held = (await store.record(claimed, DENIED, worker="w1")).task
    assert (held.status, held.review, held.result_summary) == (
        TaskStatus.COMPLETED,
        None,
        "done, some refusals were expected",
    )
    assert (held.denials, held.claimed_by) == (2, None)


async def test_what_waits_for_a_person_is_counted(store: Store) -> None:
    await _held(store)
    await store.add_task(new("deploy", requires_approval=True))
    plain = await store.add_task(new("plain"))
    assert plain.task_id is not None
    await store.record(await claim(store), Outcome(OutcomeKind.SUCCESS), worker="w1")
    attention = await store.attention(0)
    assert (attention.awaiting_review, attention.awaiting_approval, attention.denied_runs) == (1, 1, 1)
    later = await store.attention(2**62)  # no run finished after that
    assert later.denied_runs == 0


async def test_a_follow_up_works_where_its_parent_does_unless_it_names_a_folder(store: Store) -> None:
    parent = await store.add_task(new("fix the parser", workdir="/srv/repo"))
    assert parent.task_id is not None
    child = await store.add_task(new("add a test", parent_id=parent.task_id))
    own = await store.add_task(new("update the docs", parent_id=parent.task_id, workdir="/srv/docs"))
    orphan = await store.add_task(new("unrelated"))
    workdirs = [(await store.get_task(r.task_id)).workdir for r in (child, own, orphan) if r.task_id is not None]
    assert workdirs == ["/srv/repo", "/srv/docs", None]
