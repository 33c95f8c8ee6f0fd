"""Contract: each run keeps what it came to (its own summary, the status its agent
gave the task, its account), a task keeps its own spending limit, and the spend
rolls up by account."""

from __future__ import annotations

import pytest

from tests.store.contract import NO_BACKOFF, claim, new, success
from vigil.clock import ManualClock
from vigil.errors import Refused
from vigil.models import Outcome, OutcomeKind, TaskStatus
from vigil.store import CostGroup, Store


async def test_a_run_keeps_what_its_agent_closed_the_task_as(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("try twice", max_retries=3))
    first = await claim(store)
    why = "the release is not out"
    await store.request_retry(first.task.id, clock.now_ms(), why, actor="agent", run_id=first.run_id)
    await store.record(first, success(summary="I will look again later"), worker="w1")
    second = await claim(store)
    await store.close_task(second.task.id, TaskStatus.FAILED, "it never came", actor="agent", run_id=second.run_id)
    task = (await store.record(second, success(summary="Done."), worker="w1")).task

    one, two = await store.list_runs(task.id)
    assert (one.agent_status, one.summary) == ("pending", "the release is not out")
    assert (two.agent_status, two.summary) == ("failed", "it never came")
    assert (task.status, task.result_summary) == (TaskStatus.FAILED, "it never came")


async def test_a_run_the_agent_did_not_close_keeps_its_own_summary(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("flaky", max_retries=3))
    first = await claim(store)
    overloaded = Outcome(OutcomeKind.TRANSIENT, summary="API error: 529 overloaded", error="API error: 529")
    await store.record(first, overloaded, worker="w1", policy=NO_BACKOFF)
    second = await claim(store)
    await store.record(second, success(summary="all good", account="b"), worker="w1")

    one, two = await store.list_runs(first.task.id)
    assert (one.outcome, one.agent_status, one.summary) == ("transient", None, "API error: 529 overloaded")
    assert (two.agent_status, two.summary, two.account) == (None, "all good", "b")


async def test_a_close_from_another_or_an_ended_run_is_refused_and_changes_nothing(
    store: Store, clock: ManualClock
) -> None:
    await store.add_task(new("one"))
    first = await claim(store)
    await store.record(first, success(summary="first run"), worker="w1")
    await store.add_task(new("two"))
    other = await claim(store)
    before = await store.get_task(other.task.id)
    # the first run has ended, and is another task's: neither the task nor a run changes
    with pytest.raises(Refused, match=f"run #{first.run_id} is not a run of task #{other.task.id}"):
        await store.close_task(other.task.id, TaskStatus.BLOCKED, "waits", actor="agent", run_id=first.run_id)
    with pytest.raises(Refused, match=f"run #{first.run_id} has ended"):
        await store.close_task(first.task.id, TaskStatus.BLOCKED, "waits", actor="agent", run_id=first.run_id)
    assert await store.get_task(other.task.id) == before
    (run,) = await store.list_runs(first.task.id)
    assert (run.agent_status, run.summary) == (None, "first run")
    (open_run,) = await store.list_runs(other.task.id)
    assert open_run.agent_status is None


async def test_a_task_keeps_its_spending_limit(store: Store) -> None:
    added = await store.add_task(new("cheap", max_cost_usd=0.25))
    plain = await store.add_task(new("any"))
    assert added.task_id is not None
    assert plain.task_id is not None
    assert (await store.get_task(added.task_id)).max_cost_usd == 0.25
    assert (await store.get_task(plain.task_id)).max_cost_usd is None


async def test_spend_rolls_up_by_account(store: Store, clock: ManualClock) -> None:
    since = clock.now_ms()
    for account, cost in (("a", 1.0), ("b", 2.0), ("a", 0.5), (None, 0.25)):
        await store.add_task(new(f"on {account}"))
        c = await claim(store)
        await store.set_executor(c, "claude")
        await store.record(c, success(cost_usd=cost, account=account), worker="w1")
    rows = {row.key: (row.runs, row.cost_usd) for row in await store.cost_rollup(since_ms=since, by=CostGroup.ACCOUNT)}
    assert rows == {"claude:b": (1, 2.0), "claude:a": (2, 1.5), "(none)": (1, 0.25)}


async def test_record_returns_what_it_decided(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("ask, then hit the limit, then fail", max_retries=3))
    asking = await claim(store)
    await store.ask(asking.task.id, "which branch?", actor="agent", run_id=asking.run_id)
    asked = await store.record(asking, success(), worker="w1")  # the CLI said success; the run asked
    assert (asked.outcome.kind, asked.task.status, asked.attempt_given_back) == (
        OutcomeKind.ASKED,
        TaskStatus.WAITING,
        True,
    )
    await store.answer(asking.task.id, "main", actor="human")
    limited = await claim(store)
    given_back = await store.record(limited, Outcome(OutcomeKind.USAGE_LIMITED), worker="w1")
    assert (given_back.task.status, given_back.attempt_given_back) == (TaskStatus.PENDING, True)
    failing = await claim(store)
    counted = await store.record(failing, Outcome(OutcomeKind.TRANSIENT), worker="w1", policy=NO_BACKOFF)
    assert (counted.outcome.kind, counted.attempt_given_back) == (OutcomeKind.TRANSIENT, False)
    assert counted.fate is not None
    assert counted.fate.status is TaskStatus.PENDING
    replayed = await store.record(failing, success(), worker="w1")  # already recorded: nothing decided
    assert (replayed.fate, replayed.task) == (None, counted.task)
    closing = await claim(store)
    await store.close_task(closing.task.id, TaskStatus.FAILED, "no", actor="agent", run_id=closing.run_id)
    kept = await store.record(closing, success(), worker="w1")  # its agent decided: no fate written
    assert (kept.fate, kept.task.status) == (None, TaskStatus.FAILED)
