"""Contract: which task ``claim_next`` hands out, and when."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.store.backends import fresh_location, open_backend
from tests.store.contract import claim, new, success
from vigil.clock import ManualClock
from vigil.models import Outcome, OutcomeKind, TaskStatus
from vigil.store import Store


async def test_nothing_to_claim_returns_none(store: Store) -> None:
    assert await store.claim_next(worker="w1", lease_ms=1000) is None
    assert await store.next_due_at() is None


async def test_order_is_priority_then_due_time_then_id(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    specs = [  # (subject, priority, scheduled_for)
        ("p5 early", 5, now - 3000),
        ("p1 late", 1, now - 10),
        ("p9 earliest", 9, now - 99_000),
        ("p1 early b", 1, now - 2000),
        ("p1 early a", 1, now - 2000),  # same time as b, higher id
        ("p5 late", 5, now),
    ]
    for subject, priority, at in specs:
        await store.add_task(new(subject, priority=priority, scheduled_for=at))
    order = [(await claim(store)).task.subject for _ in specs]
    assert order == ["p1 early b", "p1 early a", "p1 late", "p5 early", "p5 late", "p9 earliest"]
    assert await store.claim_next(worker="w1", lease_ms=1000) is None


async def test_claim_marks_active_counts_the_attempt_and_opens_a_run(store: Store, clock: ManualClock) -> None:
    added = await store.add_task(new("work"))
    assert added.task_id is not None
    c = await store.claim_next(worker="host:1:abc", lease_ms=30_000, executor="dry-run")
    assert c is not None
    assert (c.task.id, c.attempt) == (added.task_id, 1)
    task = await store.get_task(added.task_id)
    assert task.status is TaskStatus.ACTIVE
    assert (task.claimed_by, task.lease_until) == ("host:1:abc", clock.now_ms() + 30_000)
    assert (task.started_at, task.attempt_count, task.executor) == (clock.now_ms(), 1, "dry-run")
    [run] = await store.list_runs(added.task_id)
    assert (run.id, run.attempt, run.started_at, run.finished_at) == (c.run_id, 1, clock.now_ms(), None)
    assert (run.claimed_by, run.executor) == ("host:1:abc", "dry-run")
    assert [t.id for t in await store.active_tasks()] == [added.task_id]
    events = await store.list_events(added.task_id)
    assert [(e.actor, e.kind, e.from_value, e.to_value) for e in events][-1] == (
        "dispatcher",
        "status",
        "pending",
        "active",
    )


async def test_a_future_task_is_claimed_once_due(store: Store, clock: ManualClock) -> None:
    later = clock.now_ms() + 60_000
    added = await store.add_task(new("later", priority=1, scheduled_for=later))
    assert await store.claim_next(worker="w1", lease_ms=1000) is None
    assert await store.next_due_at() == later
    clock.advance(59_999)
    assert await store.claim_next(worker="w1", lease_ms=1000) is None
    clock.advance(1)
    assert (await claim(store)).task.id == added.task_id


async def test_an_urgent_future_task_does_not_hide_a_due_one(store: Store, clock: ManualClock) -> None:
    await store.add_task(new("urgent, tomorrow", priority=1, scheduled_for=clock.now_ms() + 86_400_000))
    due = await store.add_task(new("routine, now", priority=9))
    assert (await claim(store)).task.id == due.task_id


async def test_a_task_waits_until_every_dependency_completed(store: Store, clock: ManualClock) -> None:
    a = await store.add_task(new("a", priority=5))
    b = await store.add_task(new("b", priority=5))
    assert a.task_id is not None
    assert b.task_id is not None
    after = await store.add_task(new("after a and b", priority=1, depends_on=(a.task_id, b.task_id)))
    assert after.task_id is not None

    ca = await claim(store)
    assert ca.task.id == a.task_id  # the urgent dependent is not eligible
    await store.record(ca, success(), worker="w1")
    cb = await claim(store)
    assert cb.task.id == b.task_id  # still waits on b
    assert await store.claim_next(worker="w1", lease_ms=1000) is None
    assert await store.next_due_at() is None
    await store.record(cb, success(), worker="w1")
    assert await store.next_due_at() == clock.now_ms()
    assert (await claim(store)).task.id == after.task_id


async def test_a_failed_dependency_keeps_the_task_waiting(store: Store) -> None:
    a = await store.add_task(new("a"))
    assert a.task_id is not None
    await store.add_task(new("after a", depends_on=(a.task_id,)))
    ca = await claim(store)
    await store.record(ca, Outcome(OutcomeKind.FAILED, summary="no"), worker="w1")
    assert await store.claim_next(worker="w1", lease_ms=1000) is None


async def test_a_dependency_completed_before_the_add_does_not_block(store: Store) -> None:
    a = await store.add_task(new("a"))
    assert a.task_id is not None
    await store.record(await claim(store), success(), worker="w1")
    b = await store.add_task(new("b", depends_on=(a.task_id,)))
    assert (await claim(store)).task.id == b.task_id


async def test_next_due_at_is_the_earliest_claimable_time(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    a = await store.add_task(new("blocked early", scheduled_for=now - 50))
    assert a.task_id is not None
    await store.add_task(new("waits on a", scheduled_for=now - 100, depends_on=(a.task_id,)))
    await store.add_task(new("later", priority=1, scheduled_for=now + 500))
    assert await store.next_due_at() == now - 50
    await store.defer(a.task_id, now + 1000, actor="human")
    assert await store.next_due_at() == now + 500


# Tasks as (priority, scheduled_for offset from now in ms); some are not yet due.
_tasks = st.lists(st.tuples(st.integers(1, 9), st.integers(-5, 3)), max_size=25)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=_tasks)
def test_claim_order_equals_sorting_the_due_tasks(
    backend: str, postgres_admin: str | None, template: str | None, specs: list[tuple[int, int]]
) -> None:
    async def run() -> None:
        clock = ManualClock()
        now = clock.now_ms()
        with (
            tempfile.TemporaryDirectory() as folder,
            fresh_location(backend, Path(folder), postgres_admin, template) as location,
        ):
            store = await open_backend(backend, location, clock)
            try:
                keys = []
                for priority, offset in specs:
                    added = await store.add_task(new("t", priority=priority, scheduled_for=now + offset))
                    assert added.task_id is not None
                    keys.append((priority, now + offset, added.task_id))
                claimed = []
                while (c := await store.claim_next(worker="w", lease_ms=1000)) is not None:
                    claimed.append((c.task.priority, c.task.scheduled_for, c.task.id))
                assert claimed == sorted(k for k in keys if k[1] <= now)
            finally:
                await store.close()

    asyncio.run(run())


async def test_a_runs_permission_denials_are_kept_in_order(store: Store) -> None:
    first = await store.add_task(new("denied"))
    second = await store.add_task(new("allowed"))
    denied = ("Bash: vigil task close 1 --status completed", 'Write: {"file_path": "/etc/x"}')
    c = await claim(store)
    await store.record(c, Outcome(OutcomeKind.FAILED, permission_denials=denied), worker="w1")
    c2 = await claim(store)
    await store.record(c2, Outcome(OutcomeKind.SUCCESS), worker="w1")
    assert first.task_id is not None
    assert second.task_id is not None
    [run] = await store.list_runs(first.task_id)
    assert run.permission_denials == denied
    [run2] = await store.list_runs(second.task_id)
    assert run2.permission_denials == ()


async def test_set_executor_records_it_on_the_run_and_the_active_task(store: Store) -> None:
    added = await store.add_task(new("a command skill's task"))
    claimed = await store.claim_next(worker="w1", lease_ms=1000, executor="dry-run")
    assert claimed is not None
    await store.set_executor(claimed, "command")
    assert (await store.get_task(claimed.task.id)).executor == "command"
    (run,) = await store.list_runs(added.task_id or 0)
    assert run.executor == "command"
    finished = (await store.record(claimed, success(), worker="w1")).task
    assert finished.executor == "command"
