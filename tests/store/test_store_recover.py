"""Contract: open runs and recovering the task of a dead dispatcher."""

from __future__ import annotations

import random

import pytest

from tests.store.contract import assert_counts_match, claim, new
from vigil.clock import ManualClock
from vigil.config import DispatchSettings
from vigil.errors import InputError
from vigil.fate import Policy
from vigil.models import Outcome, OutcomeKind, TaskStatus
from vigil.store import Store

CRASH = Outcome(OutcomeKind.INTERRUPTED, summary="interrupted", error="dispatcher died (worker dead:1:x)")
BACKOFF_MS = 30_000


class NoJitter(random.Random):
    """A random source that always says "all of it": the backoff is exactly the policy's."""

    def random(self) -> float:
        return 1.0


FIXED = Policy(DispatchSettings(retry_backoff_ms=BACKOFF_MS, retry_backoff_max_ms=BACKOFF_MS), NoJitter())


async def test_open_runs_lists_only_unfinished_runs(store: Store) -> None:
    await store.add_task(new("a"))
    await store.add_task(new("b"))
    first = await claim(store, "dead")
    await store.record(first, Outcome(OutcomeKind.SUCCESS), worker="dead")
    second = await claim(store, "dead")

    runs = await store.open_runs()

    assert [(r.id, r.task_id, r.claimed_by, r.finished_at) for r in runs] == [
        (second.run_id, second.task.id, "dead", None)
    ]


async def test_recover_requeues_after_a_backoff_with_the_attempt_counted(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("a"))
    c = await claim(store, "dead")
    clock.advance(5_000)

    task = await store.recover(c.run_id, CRASH, policy=FIXED)

    assert task.status is TaskStatus.PENDING
    assert task.attempt_count == 1
    assert task.claimed_by is None
    assert task.lease_until is None
    assert task.scheduled_for == clock.now_ms() + BACKOFF_MS  # like any interrupted attempt
    (run,) = await store.list_runs(task.id)
    assert run.outcome == "interrupted"
    assert run.error == "dispatcher died (worker dead:1:x)"
    assert run.finished_at == clock.now_ms()
    assert await store.open_runs() == []
    await assert_counts_match(store)
    # claimable again, as a second attempt, once the backoff has passed
    clock.advance(BACKOFF_MS)
    again = await claim(store, "new")
    assert again.attempt == 2
    assert again.task.attempt_count == 2


async def test_recover_fails_a_task_out_of_attempts(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("a", max_retries=0))
    c = await claim(store, "dead")

    task = await store.recover(c.run_id, CRASH)

    assert task.status is TaskStatus.FAILED
    assert task.completed_at == clock.now_ms()
    assert task.result_summary == "gave up after 1 attempt: interrupted"
    assert task.claimed_by is None
    await assert_counts_match(store)


async def test_recover_keeps_the_status_the_agent_gave(store: Store) -> None:
    await store.add_task(new("a"))
    c = await claim(store, "dead")
    await store.close_task(c.task.id, TaskStatus.COMPLETED, "done by the agent", actor="agent")

    task = await store.recover(c.run_id, CRASH)

    assert task.status is TaskStatus.COMPLETED
    assert task.result_summary == "done by the agent"
    assert task.claimed_by is None
    (run,) = await store.list_runs(task.id)
    assert run.outcome == "interrupted"


async def test_recover_is_idempotent(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("a"))
    c = await claim(store, "dead")
    await store.recover(c.run_id, CRASH, policy=Policy(DispatchSettings(retry_backoff_ms=0)))
    again = await claim(store, "live")  # the second attempt now runs

    task = await store.recover(c.run_id, CRASH)

    assert task.status is TaskStatus.ACTIVE
    assert task.claimed_by == "live"
    assert [r.attempt for r in await store.open_runs()] == [again.attempt]


async def test_a_cancel_requested_before_the_dispatcher_died_wins(store: Store) -> None:
    await store.add_task(new("a"))
    c = await claim(store, "dead")
    await store.cancel(c.task.id, actor="human")  # active: only a request

    task = await store.recover(c.run_id, CRASH)

    assert task.status is TaskStatus.CANCELED
    await assert_counts_match(store)


async def test_recover_of_a_missing_run_is_an_input_error(store: Store) -> None:
    with pytest.raises(InputError, match="run 99 not found"):
        await store.recover(99, CRASH)
