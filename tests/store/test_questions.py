"""Contract: the agent asks a person (``ask``), the run ends as ``asked`` and the
task waits; a person answers (``answer``) or unblocks a blocked task (``unblock``)."""

from __future__ import annotations

import pytest

from tests.store.contract import claim, new, success
from vigil.clock import ManualClock
from vigil.errors import InputError, InvalidTransition
from vigil.models import Outcome, OutcomeKind, TaskStatus
from vigil.store import Store


async def _waiting(store: Store, subject: str = "deploy", **fields: object) -> int:
    """A task whose agent asked "staging or prod?" and whose run was recorded."""
    await store.add_task(new(subject, **fields))
    c = await claim(store)
    asked = await store.ask(c.task.id, "staging or prod?", ["staging", "prod"], actor="agent")
    assert (asked.status, asked.question, asked.choices) == (TaskStatus.ACTIVE, "staging or prod?", ("staging", "prod"))
    assert asked.asked_run == c.run_id
    recorded = (await store.record(c, success(session_id="sess-1", cost_usd=0.25), worker="w1")).task
    assert recorded.status is TaskStatus.WAITING
    return c.task.id


async def test_a_run_whose_agent_asked_is_recorded_as_asked_and_gives_its_attempt_back(store: Store) -> None:
    task_id = await _waiting(store)
    task = await store.get_task(task_id)
    assert (task.attempt_count, task.claimed_by, task.cost_usd, task.answer) == (0, None, 0.25, None)
    (run,) = await store.list_runs(task_id)
    assert (run.outcome, run.session_id) == ("asked", "sess-1")
    assert (await store.count_by_status())[TaskStatus.WAITING] == 1
    assert await store.claim_next(worker="w2", lease_ms=60_000) is None  # a waiting task is not claimed


async def test_an_answer_makes_the_task_due_at_once_with_one_event_and_a_note(store: Store, clock: ManualClock) -> None:
    task_id = await _waiting(store)
    clock.advance(60_000)
    before = len(await store.list_events(task_id))
    answered = await store.answer(task_id, "staging", actor="human")
    assert (answered.status, answered.answer, answered.scheduled_for) == (TaskStatus.PENDING, "staging", clock.now_ms())
    assert answered.attempt_count == 0
    events = (await store.list_events(task_id))[before:]
    assert [(e.kind, e.actor, e.from_value, e.to_value) for e in events] == [("status", "human", "waiting", "pending")]
    assert [(n.author, n.text) for n in await store.list_notes(task_id)] == [("human", "answer: staging")]
    again = await claim(store, "w2")
    assert (again.task.id, again.task.attempt_count, again.attempt) == (task_id, 1, 2)
    done = (await store.record(again, success(), worker="w2")).task
    assert (done.status, done.attempt_count) == (TaskStatus.COMPLETED, 1)  # the cycle used one attempt


async def test_only_a_waiting_task_can_be_answered(store: Store) -> None:
    result = await store.add_task(new("pending"))
    assert result.task_id is not None
    with pytest.raises(InvalidTransition, match=r"task #\d+ is pending, cannot answer it"):
        await store.answer(result.task_id, "yes", actor="human")
    task_id = await _waiting(store, "asks")
    with pytest.raises(InputError, match="an answer must not be empty"):
        await store.answer(task_id, "  ", actor="human")


async def test_only_a_running_task_may_ask(store: Store) -> None:
    result = await store.add_task(new("pending"))
    assert result.task_id is not None
    with pytest.raises(InvalidTransition, match="is pending, cannot ask a question"):
        await store.ask(result.task_id, "why?", actor="agent")
    c = await claim(store)
    with pytest.raises(InputError, match="a question must not be empty"):
        await store.ask(c.task.id, " ", actor="agent")
    await store.cancel(c.task.id, actor="human")
    with pytest.raises(InvalidTransition, match="cannot ask a question"):
        await store.ask(c.task.id, "why?", actor="agent")


async def test_a_cancel_wins_over_a_question(store: Store) -> None:
    await store.add_task(new("asks, then is canceled"))
    c = await claim(store)
    await store.ask(c.task.id, "which one?", actor="agent")
    await store.cancel(c.task.id, actor="human")
    canceled = Outcome(OutcomeKind.CANCELED, summary="canceled while running")
    done = (await store.record(c, canceled, worker="w1")).task
    assert done.status is TaskStatus.CANCELED
    (run,) = await store.list_runs(c.task.id)
    assert run.outcome == "canceled"


async def test_a_run_that_asked_and_then_closed_its_task_keeps_the_agents_status(store: Store) -> None:
    await store.add_task(new("asks, then decides"))
    c = await claim(store)
    await store.ask(c.task.id, "which one?", actor="agent")
    await store.close_task(c.task.id, TaskStatus.COMPLETED, "found out myself", actor="agent")
    done = (await store.record(c, success(), worker="w1")).task
    assert done.status is TaskStatus.COMPLETED
    (run,) = await store.list_runs(c.task.id)
    assert run.outcome == "success"


async def test_a_waiting_task_holds_its_source_key(store: Store) -> None:
    task_id = await _waiting(store, source_key="deploy-42")
    again = await store.add_task(new("deploy again", source_key="deploy-42"))
    assert (again.created, again.task_id) == (False, task_id)


async def test_a_waiting_task_can_be_canceled_and_reprioritised(store: Store) -> None:
    task_id = await _waiting(store)
    assert (await store.set_priority(task_id, 1, actor="human")).priority == 1
    assert (await store.cancel(task_id, actor="human")).status is TaskStatus.CANCELED


async def test_unblock_puts_a_blocked_task_back_with_its_note_and_attempts(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("stuck", max_retries=1))
    c = await claim(store)
    await store.close_task(c.task.id, TaskStatus.BLOCKED, "cannot reach the server", actor="agent")
    await store.record(c, success(), worker="w1")
    clock.advance(60_000)
    before = len(await store.list_events(c.task.id))
    unblocked = await store.unblock(c.task.id, "the server is back", actor="human")
    assert (unblocked.status, unblocked.attempt_count) == (TaskStatus.PENDING, 1)
    assert unblocked.scheduled_for == clock.now_ms()
    events = (await store.list_events(c.task.id))[before:]
    assert [(e.kind, e.from_value, e.to_value) for e in events] == [("status", "blocked", "pending")]
    assert [(n.author, n.text) for n in await store.list_notes(c.task.id)] == [("human", "the server is back")]


async def test_unblock_refuses_other_states_and_tasks_awaiting_a_decision(store: Store) -> None:
    result = await store.add_task(new("pending"))
    assert result.task_id is not None
    with pytest.raises(InvalidTransition, match=r"is pending, cannot unblock it"):
        await store.unblock(result.task_id, actor="human")
    gated = await store.add_task(new("needs approval", requires_approval=True))
    assert gated.task_id is not None
    with pytest.raises(InvalidTransition, match=r"is awaiting approval, cannot unblock it \(use approve or reject\)"):
        await store.unblock(gated.task_id, actor="human")
    assert (await store.list_notes(result.task_id)) == []
