"""Contract: every state change, its audit row, and the changes that are refused."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.store.contract import NO_BACKOFF, all_tasks, assert_counts_match, claim, ending, new, success
from vigil.clock import ManualClock
from vigil.errors import DuplicateOpenTask, InputError, InvalidTransition, TaskNotFound
from vigil.models import Outcome, OutcomeKind, Task, TaskEvent, TaskStatus
from vigil.store import Store


def trail(events: list[TaskEvent]) -> list[tuple[str, str, str | None, str | None]]:
    return [(e.actor, e.kind, e.from_value, e.to_value) for e in events]


async def add(store: Store, subject: str = "t", **fields: object) -> int:
    result = await store.add_task(new(subject, **fields))
    assert result.task_id is not None
    return result.task_id


async def test_finish_records_the_run_costs_and_status(store: Store, clock: ManualClock) -> None:
    task_id = await add(store, "work")
    c = await claim(store)
    clock.advance(4_000)
    outcome = Outcome(
        OutcomeKind.SUCCESS,
        summary="done",
        detail="all of it",
        exit_code=0,
        cost_usd=0.25,
        api_cost_usd=0.3,
        tokens_in=1200,
        tokens_out=340,
        cache_read_tokens=900,
        cache_write_tokens=50,
        model="opus",
        session_id="s-1",
        transcript_path="logs/1.jsonl",
    )
    task = (await store.record(c, outcome, worker="w1")).task
    assert task == await store.get_task(task_id)
    assert (task.status, task.result_summary, task.result_detail) == (TaskStatus.COMPLETED, "done", "all of it")
    assert (task.cost_usd, task.api_cost_usd, task.tokens_in, task.tokens_out) == (0.25, 0.3, 1200, 340)
    assert (task.model, task.completed_at, task.claimed_by, task.lease_until) == ("opus", clock.now_ms(), None, None)
    [run] = await store.list_runs(task_id)
    assert (run.finished_at, run.outcome, run.exit_code, run.error) == (clock.now_ms(), "success", 0, None)
    assert (run.cost_usd, run.api_cost_usd, run.tokens_in, run.tokens_out) == (0.25, 0.3, 1200, 340)
    assert (run.cache_read_tokens, run.cache_write_tokens) == (900, 50)
    assert (run.model, run.session_id, run.transcript_path) == ("opus", "s-1", "logs/1.jsonl")
    assert trail(await store.list_events(task_id))[-1] == ("dispatcher", "status", "active", "completed")


async def test_finish_failed_keeps_the_error_on_the_run(store: Store) -> None:
    task_id = await add(store)
    c = await claim(store)
    failed = Outcome(OutcomeKind.FAILED, summary="could not", error="exit 3", exit_code=3, cost_usd=0.1)
    task = (await store.record(c, failed, worker="w1")).task
    assert (task.status, task.result_summary, task.cost_usd) == (TaskStatus.FAILED, "could not", 0.1)
    [run] = await store.list_runs(task_id)
    assert (run.outcome, run.error, run.exit_code) == ("failed", "exit 3", 3)


async def test_costs_add_up_over_attempts(store: Store, clock: ManualClock) -> None:
    task_id = await add(store)
    c1 = await claim(store)
    transient = Outcome(OutcomeKind.TRANSIENT, error="overloaded", cost_usd=0.5, tokens_in=10, tokens_out=1)
    await store.record(c1, transient, worker="w1", policy=NO_BACKOFF)
    c2 = await claim(store)
    assert c2.attempt == 2
    task = (await store.record(c2, success(cost_usd=0.25, tokens_in=5, tokens_out=2), worker="w1")).task
    assert (task.cost_usd, task.tokens_in, task.tokens_out, task.attempt_count) == (0.75, 15, 3, 2)
    assert [(r.attempt, r.outcome) for r in await store.list_runs(task_id)] == [(1, "transient"), (2, "success")]


async def test_a_usage_limit_gives_the_attempt_back_and_the_task_is_due_at_once(
    store: Store, clock: ManualClock
) -> None:
    """The limit stops the account, not the task: the account (or the loop's gate)
    waits for the reset, the task is due now for another account to run."""
    task_id = await add(store)
    c = await claim(store)
    retry_at = clock.now_ms() + 90_000
    outcome = Outcome(OutcomeKind.USAGE_LIMITED, summary="limit", error="429", retry_at=retry_at)
    task = (await store.record(c, outcome, worker="w1")).task
    attempts_after = 0
    assert (task.status, task.scheduled_for, task.attempt_count) == (TaskStatus.PENDING, clock.now_ms(), attempts_after)
    assert (task.claimed_by, task.lease_until) == (None, None)
    [run] = await store.list_runs(task_id)
    assert (run.outcome, run.error, run.finished_at) == ("usage_limited", "429", clock.now_ms())
    assert trail(await store.list_events(task_id))[-1] == ("dispatcher", "status", "active", "pending")
    again = await claim(store)
    assert (again.task.id, again.attempt, again.task.attempt_count) == (task_id, 2, attempts_after + 1)


async def test_cancel_pending_cancels_it(store: Store, clock: ManualClock) -> None:
    task_id = await add(store)
    task = await store.cancel(task_id, actor="human")
    assert (task.status, task.completed_at, task.cancel_requested) == (TaskStatus.CANCELED, clock.now_ms(), False)
    assert trail(await store.list_events(task_id))[-1] == ("human", "status", "pending", "canceled")
    assert await store.claim_next(worker="w1", lease_ms=1000) is None


async def test_cancel_active_sets_the_flag_and_keeps_the_status(store: Store) -> None:
    task_id = await add(store)
    c = await claim(store)
    task = await store.cancel(task_id, actor="human")
    assert (task.status, task.cancel_requested, task.claimed_by) == (TaskStatus.ACTIVE, True, "w1")
    assert trail(await store.list_events(task_id))[-1] == ("human", "cancel_requested", None, "active")
    assert await store.renew_lease(task_id, worker="w1", lease_until=123) is True
    # The dispatcher honours the flag; the status changes only then.
    done = (await store.record(c, Outcome(OutcomeKind.CANCELED), worker="w1")).task
    assert done.status is TaskStatus.CANCELED
    await assert_counts_match(store)


@pytest.mark.parametrize("kind", [OutcomeKind.TRANSIENT, OutcomeKind.STOPPED])
async def test_a_cancel_requested_while_it_ran_wins_over_a_requeue(
    store: Store, clock: ManualClock, kind: OutcomeKind
) -> None:
    """The request may land after the last heartbeat, just before the attempt fails
    transiently (or vigil is stopped): the retry must not run the task the person
    canceled."""
    task_id = await add(store)
    c = await claim(store)
    await store.cancel(task_id, actor="human")
    outcome = Outcome(kind, error="overloaded")
    task = (await store.record(c, outcome, worker="w1", policy=NO_BACKOFF)).task
    assert (task.status, task.completed_at, task.claimed_by) == (TaskStatus.CANCELED, clock.now_ms(), None)
    assert trail(await store.list_events(task_id))[-1] == ("dispatcher", "status", "active", "canceled")
    [run] = await store.list_runs(task_id)
    assert (run.outcome, run.error) == (str(kind), "overloaded")
    assert await store.claim_next(worker="w1", lease_ms=1000) is None
    await assert_counts_match(store)
    # A person may still retry it, and then it runs again.
    assert (await store.retry(task_id, actor="human")).status is TaskStatus.PENDING
    assert (await claim(store)).task.id == task_id


async def test_a_replayed_finish_changes_nothing(store: Store) -> None:
    """A claim whose run is already recorded adds no cost and no status twice."""
    task_id = await add(store)
    c = await claim(store)
    done = (await store.record(c, success(summary="first", cost_usd=0.5, tokens_in=10), worker="w1")).task
    runs = await store.list_runs(task_id)
    events = await store.list_events(task_id)
    again = (await store.record(c, success(summary="again", cost_usd=0.5, tokens_in=10), worker="w1")).task
    assert again == done == await store.get_task(task_id)
    transient = Outcome(OutcomeKind.TRANSIENT, cost_usd=1.0)
    after = (await store.record(c, transient, worker="w1")).task
    assert after == done
    assert await store.list_runs(task_id) == runs
    assert await store.list_events(task_id) == events


async def test_a_stale_claim_cannot_finish_the_next_attempt(store: Store, clock: ManualClock) -> None:
    """The same worker requeued attempt 1 and now runs attempt 2: a late finish of
    attempt 1 must not end attempt 2 nor count its costs again."""
    task_id = await add(store)
    first = await claim(store)
    transient = Outcome(OutcomeKind.TRANSIENT, error="overloaded", cost_usd=0.25)
    await store.record(first, transient, worker="w1", policy=NO_BACKOFF)
    second = await claim(store)
    late = (await store.record(first, success(summary="late", cost_usd=0.25), worker="w1")).task
    assert (late.status, late.claimed_by, late.cost_usd) == (TaskStatus.ACTIVE, "w1", 0.25)
    assert [(r.attempt, r.outcome) for r in await store.list_runs(task_id)] == [(1, "transient"), (2, None)]
    done = (await store.record(second, success(summary="real", cost_usd=0.5), worker="w1")).task
    assert (done.status, done.result_summary, done.cost_usd) == (TaskStatus.COMPLETED, "real", 0.75)


@pytest.mark.parametrize("hold", [True, False])
async def test_a_cancel_requested_right_after_the_claim_wins_over_putting_it_back_unrun(
    store: Store, clock: ManualClock, hold: bool
) -> None:
    task_id = await add(store)
    c = await claim(store)
    await store.cancel(task_id, actor="human")
    task = await store.put_back(c, worker="w1", until=None if hold else clock.now_ms() + 1000)
    assert (task.status, task.claimed_by, task.attempt_count) == (TaskStatus.CANCELED, None, 0)
    assert trail(await store.list_events(task_id))[-1] == ("dispatcher", "status", "active", "canceled")
    assert await store.list_runs(task_id) == []
    clock.advance(1000)
    assert await store.claim_next(worker="w1", lease_ms=1000) is None
    await assert_counts_match(store)


@pytest.mark.parametrize("hold", [True, False])
async def test_a_stale_claim_cannot_put_the_next_attempt_back(store: Store, clock: ManualClock, hold: bool) -> None:
    task_id = await add(store)
    first = await claim(store)
    await store.record(first, Outcome(OutcomeKind.TRANSIENT), worker="w1", policy=NO_BACKOFF)
    await claim(store)  # attempt 2, same worker
    before = await store.get_task(task_id)
    with pytest.raises(InvalidTransition):
        await store.put_back(first, worker="w1", until=None if hold else clock.now_ms() + 1000)
    assert await store.get_task(task_id) == before
    assert [(r.attempt, r.finished_at is None) for r in await store.list_runs(task_id)] == [(1, False), (2, True)]


async def test_renew_lease_of_a_task_the_worker_does_not_hold(store: Store) -> None:
    task_id = await add(store)
    await claim(store, worker="w1")
    assert await store.renew_lease(task_id, worker="w1", lease_until=5) is False
    with pytest.raises(InvalidTransition):
        await store.renew_lease(task_id, worker="w2", lease_until=5)
    assert (await store.get_task(task_id)).lease_until == 5


async def test_set_priority_and_defer(store: Store, clock: ManualClock) -> None:
    task_id = await add(store, priority=5)
    task = await store.set_priority(task_id, 2, actor="human")
    assert task.priority == 2
    later = clock.now_ms() + 3_600_000
    task = await store.defer(task_id, later, actor="agent")
    assert task.scheduled_for == later
    assert trail(await store.list_events(task_id))[1:] == [
        ("human", "priority", "5", "2"),
        ("agent", "scheduled", str(clock.now_ms()), str(later)),
    ]
    with pytest.raises(InputError):
        await store.set_priority(task_id, 0, actor="human")
    with pytest.raises(InputError):
        await store.set_priority(task_id, 10, actor="human")
    assert (await store.get_task(task_id)).priority == 2


async def test_retry_resets_a_failed_task_and_keeps_its_history(store: Store, clock: ManualClock) -> None:
    task_id = await add(store, max_retries=1)
    await store.add_note(task_id, "tried the obvious", author="agent")
    c = await claim(store)
    failed = Outcome(OutcomeKind.FAILED, summary="broke", error="boom", cost_usd=0.5)
    await store.record(c, failed, worker="w1")
    events_before = await store.list_events(task_id)
    clock.advance(10_000)

    task = await store.retry(task_id, actor="human")
    assert (task.status, task.scheduled_for, task.attempt_count) == (TaskStatus.PENDING, clock.now_ms(), 0)
    assert (task.completed_at, task.cancel_requested) == (None, False)
    assert task.cost_usd == 0.5  # spend is history too
    [run] = await store.list_runs(task_id)
    assert (run.outcome, run.error) == ("failed", "boom")
    assert [n.text for n in await store.list_notes(task_id)] == ["tried the obvious"]
    events = await store.list_events(task_id)
    assert events[: len(events_before)] == events_before
    assert trail(events[len(events_before) :]) == [("human", "status", "failed", "pending")]
    again = await claim(store)
    assert (again.task.id, again.attempt) == (task_id, 2)


async def test_retry_a_canceled_task(store: Store) -> None:
    task_id = await add(store)
    await store.cancel(task_id, actor="human")
    assert (await store.retry(task_id, actor="human")).status is TaskStatus.PENDING
    await assert_counts_match(store)


async def test_retry_refused_while_another_open_task_holds_the_key(store: Store) -> None:
    first = await add(store, "check", source_key="k")
    await store.cancel(first, actor="human")
    second = await add(store, "check again", source_key="k")
    before = await store.get_task(first)
    with pytest.raises(DuplicateOpenTask):
        await store.retry(first, actor="human")
    assert await store.get_task(first) == before
    assert (await store.get_task(second)).status is TaskStatus.PENDING
    await assert_counts_match(store)


async def test_close_task_by_the_agent(store: Store, clock: ManualClock) -> None:
    task_id = await add(store)
    task = await store.close_task(task_id, TaskStatus.COMPLETED, "done by hand", actor="agent")
    assert (task.status, task.result_summary, task.completed_at) == (
        TaskStatus.COMPLETED,
        "done by hand",
        clock.now_ms(),
    )
    assert trail(await store.list_events(task_id))[-1] == ("agent", "status", "pending", "completed")
    blocked = await add(store, "needs input")
    task = await store.close_task(blocked, TaskStatus.BLOCKED, "which account?", actor="agent")
    assert (task.status, task.completed_at) == (TaskStatus.BLOCKED, None)
    with pytest.raises(InputError):
        await store.close_task(blocked, TaskStatus.CANCELED, "no", actor="agent")


async def test_closing_an_active_task_keeps_the_claim_so_finish_keeps_its_status(store: Store) -> None:
    task_id = await add(store)
    c = await claim(store)
    closed = await store.close_task(task_id, TaskStatus.COMPLETED, "I did it", actor="agent")
    assert (closed.status, closed.claimed_by) == (TaskStatus.COMPLETED, "w1")
    # The dispatcher then records the run with whatever it concluded.
    task = (await store.record(c, success(summary="exit 0", cost_usd=0.2), worker="w1")).task
    assert (task.status, task.result_summary, task.cost_usd) == (TaskStatus.COMPLETED, "I did it", 0.2)
    assert (task.claimed_by, task.lease_until) == (None, None)
    [run] = await store.list_runs(task_id)
    assert (run.outcome, run.cost_usd) == ("success", 0.2)
    assert [e.to_value for e in await store.list_events(task_id) if e.kind == "status"] == ["active", "completed"]
    await assert_counts_match(store)


async def test_requeue_of_a_task_the_agent_closed_keeps_its_status(store: Store, clock: ManualClock) -> None:
    task_id = await add(store)
    c = await claim(store)
    await store.close_task(task_id, TaskStatus.BLOCKED, "waiting on a person", actor="agent")
    task = (await store.record(c, Outcome(OutcomeKind.TRANSIENT), worker="w1")).task
    assert (task.status, task.claimed_by) == (TaskStatus.BLOCKED, None)
    await assert_counts_match(store)


async def test_a_whole_life_leaves_one_event_per_change(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    task_id = await add(store, priority=5)
    await store.set_priority(task_id, 3, actor="human")
    await store.defer(task_id, now + 10, actor="agent")
    clock.set(now + 10)
    c = await claim(store)
    await store.record(c, Outcome(OutcomeKind.USAGE_LIMITED, retry_at=now + 20), worker="w1")
    clock.set(now + 20)
    c = await claim(store)
    await store.cancel(task_id, actor="human")
    await store.record(c, Outcome(OutcomeKind.CANCELED), worker="w1")
    await store.retry(task_id, actor="human")
    c = await claim(store)
    await store.add_note(task_id, "notes are not state changes", author="agent")
    await store.close_task(task_id, TaskStatus.COMPLETED, "done", actor="agent")
    await store.record(c, success(), worker="w1")

    assert trail(await store.list_events(task_id)) == [
        ("human", "created", None, "pending"),
        ("human", "priority", "5", "3"),
        ("agent", "scheduled", str(now), str(now + 10)),
        ("dispatcher", "status", "pending", "active"),
        ("dispatcher", "status", "active", "pending"),
        ("dispatcher", "status", "pending", "active"),
        ("human", "cancel_requested", None, "active"),
        ("dispatcher", "status", "active", "canceled"),
        ("human", "status", "canceled", "pending"),
        ("dispatcher", "status", "pending", "active"),
        ("agent", "status", "active", "completed"),
    ]
    events = await store.list_events(task_id)
    assert [e.at for e in events] == sorted(e.at for e in events)
    assert len(await store.list_runs(task_id)) == 3


Change = Callable[[Store, int], Awaitable[object]]
CHANGES: dict[str, Change] = {
    "cancel": lambda s, i: s.cancel(i, actor="human"),
    "retry": lambda s, i: s.retry(i, actor="human"),
    "prio": lambda s, i: s.set_priority(i, 1, actor="human"),
    "defer": lambda s, i: s.defer(i, 1, actor="human"),
    "close": lambda s, i: s.close_task(i, TaskStatus.COMPLETED, "x", actor="agent"),
}
# Which changes each status refuses.
REFUSED = {
    TaskStatus.PENDING: ["retry"],
    TaskStatus.ACTIVE: ["retry", "prio", "defer"],
    TaskStatus.BLOCKED: ["retry"],
    TaskStatus.COMPLETED: ["cancel", "retry", "prio", "defer", "close"],
    TaskStatus.FAILED: ["cancel", "prio", "defer", "close"],
    TaskStatus.CANCELED: ["cancel", "prio", "defer", "close"],
}


async def _task_in(store: Store, status: TaskStatus) -> int:
    task_id = await add(store)
    if status is TaskStatus.PENDING:
        return task_id
    if status is TaskStatus.BLOCKED:
        await store.close_task(task_id, TaskStatus.BLOCKED, "waits", actor="agent")
        return task_id
    c = await claim(store)
    if status is TaskStatus.ACTIVE:
        return task_id
    await store.record(c, ending(status), worker="w1")
    return task_id


@pytest.mark.parametrize(
    ("status", "change"), [(status, change) for status, changes in REFUSED.items() for change in changes]
)
async def test_invalid_transitions_raise_and_change_nothing(store: Store, status: TaskStatus, change: str) -> None:
    task_id = await _task_in(store, status)
    before: Task = await store.get_task(task_id)
    events = await store.list_events(task_id)
    with pytest.raises(InvalidTransition) as refused:
        await CHANGES[change](store, task_id)
    assert refused.value.status == status
    assert await store.get_task(task_id) == before
    assert await store.list_events(task_id) == events
    await assert_counts_match(store)


@pytest.mark.parametrize("change", CHANGES)
async def test_changes_to_a_missing_task_raise_task_not_found(store: Store, change: str) -> None:
    with pytest.raises(TaskNotFound):
        await CHANGES[change](store, 404)
    with pytest.raises(TaskNotFound):
        await store.get_task(404)
    with pytest.raises(TaskNotFound):
        await store.add_note(404, "hello", author="human")
    assert await all_tasks(store) == []


async def test_a_priority_step_starts_from_the_stored_priority(store: Store) -> None:
    """Two people press + on the same view of a task at priority 5: it moves twice,
    the step read and written in one transaction; at the end of the range it stays."""
    added = await store.add_task(new("step me", priority=5))
    assert added.task_id is not None
    task_id = added.task_id
    assert (await store.shift_priority(task_id, -1, actor="human"))[0] == 5
    was, done = await store.shift_priority(task_id, -1, actor="human")
    assert (was, done.priority) == (4, 3)
    await store.set_priority(task_id, 1, actor="human")
    assert await store.shift_priority(task_id, -1, actor="human") == (1, await store.get_task(task_id))
    c = await claim(store)
    with pytest.raises(InvalidTransition, match="is active, cannot change its priority"):
        await store.shift_priority(c.task.id, 1, actor="human")
    assert (await store.get_task(task_id)).priority == 1
