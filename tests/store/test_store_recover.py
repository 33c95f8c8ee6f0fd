"""Contract: open runs and recovering the task of a dead dispatcher."""

from __future__ import annotations

import pytest

from tests.store.contract import assert_counts_match, claim, new
from vigil.clock import ManualClock
from vigil.errors import InputError
from vigil.models import Outcome, OutcomeKind, TaskStatus
from vigil.store import Store

CRASH = Outcome(OutcomeKind.INTERRUPTED, summary="interrupted", error="dispatcher died (worker dead:1:x)")


async def test_open_runs_lists_only_unfinished_runs(store: Store) -> None:
    await store.add_task(new("a"))
    await store.add_task(new("b"))
    first = await claim(store, "dead")
    await store.finish(first, Outcome(OutcomeKind.SUCCESS), TaskStatus.COMPLETED, worker="dead")
    second = await claim(store, "dead")

    runs = await store.open_runs()

    assert [(r.id, r.task_id, r.claimed_by, r.finished_at) for r in runs] == [
        (second.run_id, second.task.id, "dead", None)
    ]


async def test_recover_requeues_with_the_attempt_counted(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("a"))
    c = await claim(store, "dead")
    clock.advance(5_000)

    task = await store.recover(c.run_id, CRASH, status=TaskStatus.PENDING, retry_at=clock.now_ms())

    assert task.status is TaskStatus.PENDING
    assert task.attempt_count == 1
    assert task.claimed_by is None
    assert task.lease_until is None
    assert task.scheduled_for == clock.now_ms()
    (run,) = await store.list_runs(task.id)
    assert run.outcome == "interrupted"
    assert run.error == "dispatcher died (worker dead:1:x)"
    assert run.finished_at == clock.now_ms()
    assert await store.open_runs() == []
    await assert_counts_match(store)
    # claimable again, as a second attempt
    again = await claim(store, "new")
    assert again.attempt == 2
    assert again.task.attempt_count == 2


async def test_recover_can_fail_the_task(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("a", max_retries=0))
    c = await claim(store, "dead")

    task = await store.recover(c.run_id, CRASH, status=TaskStatus.FAILED)

    assert task.status is TaskStatus.FAILED
    assert task.completed_at == clock.now_ms()
    assert task.result_summary == "interrupted"
    assert task.claimed_by is None
    await assert_counts_match(store)


async def test_recover_keeps_the_status_the_agent_gave(store: Store) -> None:
    await store.add_task(new("a"))
    c = await claim(store, "dead")
    await store.close_task(c.task.id, TaskStatus.COMPLETED, "done by the agent", actor="agent")

    task = await store.recover(c.run_id, CRASH, status=TaskStatus.PENDING, retry_at=0)

    assert task.status is TaskStatus.COMPLETED
    assert task.result_summary == "done by the agent"
    assert task.claimed_by is None
    (run,) = await store.list_runs(task.id)
    assert run.outcome == "interrupted"


async def test_recover_is_idempotent(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("a"))
    c = await claim(store, "dead")
    await store.recover(c.run_id, CRASH, status=TaskStatus.PENDING, retry_at=clock.now_ms())
    again = await claim(store, "live")  # the second attempt now runs

    task = await store.recover(c.run_id, CRASH, status=TaskStatus.FAILED)

    assert task.status is TaskStatus.ACTIVE
    assert task.claimed_by == "live"
    assert [r.attempt for r in await store.open_runs()] == [again.attempt]


@pytest.mark.parametrize(
    ("status", "retry_at"),
    [(TaskStatus.COMPLETED, None), (TaskStatus.ACTIVE, None), (TaskStatus.PENDING, None)],
)
async def test_recover_refuses_bad_requests(store: Store, status: TaskStatus, retry_at: int | None) -> None:
    await store.add_task(new("a"))
    c = await claim(store, "dead")

    with pytest.raises(InputError):
        await store.recover(c.run_id, CRASH, status=status, retry_at=retry_at)

    assert (await store.get_task(c.task.id)).status is TaskStatus.ACTIVE


async def test_recover_of_a_missing_run_is_an_input_error(store: Store) -> None:
    with pytest.raises(InputError, match="run 99 not found"):
        await store.recover(99, CRASH, status=TaskStatus.FAILED)
