"""Contract: adding tasks, one and in batches, and both dedup scopes."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

import pytest

from tests.store.contract import all_tasks, assert_counts_match, claim, new, success
from vigil.clock import ManualClock
from vigil.errors import InputError, TaskNotFound
from vigil.models import DedupScope, NewTask, TaskStatus
from vigil.store import Store


async def test_add_one_stores_every_field(store: Store, clock: ManualClock) -> None:
    parent = await store.add_task(new("parent"))
    result = await store.add_task(
        new(
            "write the report",
            description="weekly, in markdown",
            priority=2,
            skills=("writing", "git"),
            source="sensor:feeds",
            source_key="feed:42",
            parent_id=parent.task_id,
            scheduled_for=clock.now_ms() + 5_000,
            max_retries=7,
        ),
        actor="sensor:feeds",
    )
    assert result.created
    assert result.task_id is not None
    task = await store.get_task(result.task_id)
    assert (task.subject, task.description, task.priority) == ("write the report", "weekly, in markdown", 2)
    assert task.skills == ("writing", "git")
    assert (task.source, task.source_key, task.dedup) == ("sensor:feeds", "feed:42", DedupScope.OPEN)
    assert task.parent_id == parent.task_id
    assert task.scheduled_for == clock.now_ms() + 5_000
    assert task.created_at == task.updated_at == clock.now_ms()
    assert (task.status, task.attempt_count, task.max_retries) == (TaskStatus.PENDING, 0, 7)
    assert (task.started_at, task.completed_at, task.claimed_by) == (None, None, None)
    events = await store.list_events(task.id)
    assert [(e.actor, e.kind, e.from_value, e.to_value) for e in events] == [
        ("sensor:feeds", "created", None, "pending")
    ]


async def test_add_defaults_to_due_now(store: Store, clock: ManualClock) -> None:
    result = await store.add_task(new("now"))
    assert result.task_id is not None
    task = await store.get_task(result.task_id)
    assert task.scheduled_for == clock.now_ms()
    assert task.priority == 5


async def test_batch_reports_created_and_ignored(store: Store) -> None:
    held = await store.add_task(new("already there", source_key="k1"))
    batch = await store.add_tasks(
        [
            new("a", source_key="k1"),  # held by an open task
            new("b", source_key="k2"),
            new("c", source_key="k2"),  # duplicate within the batch itself
            new("d"),  # no key: never deduplicated
            new("e"),
        ],
        actor="sensor:x",
    )
    assert (batch.created, batch.ignored) == (3, 2)
    subjects = {t.id: t.subject for t in await all_tasks(store)}
    assert [subjects[i] for i in batch.created_ids] == ["b", "d", "e"]
    assert len(subjects) == 4
    assert held.task_id in subjects
    await assert_counts_match(store)


async def test_a_bad_row_rolls_back_the_whole_batch(store: Store) -> None:
    before = await all_tasks(store)
    for bad in (new("   "), new("p0", priority=0), new("p10", priority=10), new("dep", depends_on=(999,))):
        with pytest.raises(InputError):
            await store.add_tasks([new("good 1", source_key="g1"), bad, new("good 2")], actor="human")
        assert await all_tasks(store) == before
    # Nothing of the failed batches holds a key or an id: the next add is clean.
    again = await store.add_task(new("good 1", source_key="g1"))
    assert again.created
    assert again.task_id is not None
    assert [e.kind for e in await store.list_events(again.task_id)] == ["created"]
    await assert_counts_match(store)


async def test_open_scope_allows_a_new_task_once_the_old_one_finished(store: Store) -> None:
    first = await store.add_task(new("check feed", source_key="feed"))
    dup = await store.add_task(new("check feed again", source_key="feed"))
    assert (dup.created, dup.task_id) == (False, first.task_id)

    c = await claim(store)
    dup_active = await store.add_task(new("while it runs", source_key="feed"))
    assert (dup_active.created, dup_active.task_id) == (False, first.task_id)
    await store.record(c, success(), worker="w1")

    second = await store.add_task(new("check feed, next round", source_key="feed"))
    assert second.created
    assert second.task_id != first.task_id
    dup2 = await store.add_task(new("once more", source_key="feed"))
    assert (dup2.created, dup2.task_id) == (False, second.task_id)


async def test_a_dedup_hit_names_the_open_holder_even_when_a_newer_task_finished(store: Store) -> None:
    old = await add_id(store, new("first", source_key="k"))
    await store.cancel(old, actor="human")
    newer = await add_id(store, new("second", source_key="k"))
    await store.cancel(newer, actor="human")
    await store.retry(old, actor="human")  # the older task holds the key again
    hit = await store.add_task(new("third", source_key="k"))
    assert (hit.created, hit.task_id) == (False, old)


async def test_a_key_reused_by_many_finished_tasks(store: Store) -> None:
    """A sensor that emits one key every run: each finished task frees it."""
    ids = []
    for _ in range(30):
        ids.append(await add_id(store, new("poll", source_key="poll")))
        await store.record(await claim(store), success(), worker="w1")
    assert len(set(ids)) == 30
    current = await add_id(store, new("poll", source_key="poll"))
    hit = await store.add_task(new("poll", source_key="poll"))
    assert (hit.created, hit.task_id) == (False, current)
    ever = await store.add_task(new("poll once", source_key="poll", dedup=DedupScope.EVER))
    assert (ever.created, ever.task_id) == (False, current)


async def add_id(store: Store, task: NewTask) -> int:
    result = await store.add_task(task)
    assert result.created
    assert result.task_id is not None
    return result.task_id


async def test_open_scope_counts_blocked_as_open(store: Store) -> None:
    first = await store.add_task(new("x", source_key="k"))
    assert first.task_id is not None
    await store.close_task(first.task_id, TaskStatus.BLOCKED, "needs a person", actor="agent")
    dup = await store.add_task(new("x again", source_key="k"))
    assert (dup.created, dup.task_id) == (False, first.task_id)


async def test_ever_scope_uses_a_key_once_even_after_it_finished(store: Store) -> None:
    first = await store.add_task(new("announce v1", source_key="release:v1", dedup=DedupScope.EVER))
    assert first.created
    dup = await store.add_task(new("announce v1", source_key="release:v1", dedup=DedupScope.EVER))
    assert (dup.created, dup.task_id) == (False, first.task_id)

    c = await claim(store)
    await store.record(c, success(), worker="w1")
    after = await store.add_task(new("announce v1", source_key="release:v1", dedup=DedupScope.EVER))
    assert (after.created, after.task_id) == (False, first.task_id)
    batch = await store.add_tasks([new("again", source_key="release:v1", dedup=DedupScope.EVER)], actor="s")
    assert (batch.created, batch.ignored) == (0, 1)
    assert len(await all_tasks(store)) == 1


async def test_ever_scope_refuses_a_key_an_earlier_open_scope_task_used(store: Store) -> None:
    first = await store.add_task(new("once", source_key="k"))
    c = await claim(store)
    await store.record(c, success(), worker="w1")
    ever = await store.add_task(new("forever", source_key="k", dedup=DedupScope.EVER))
    assert (ever.created, ever.task_id) == (False, first.task_id)


async def test_ever_scope_needs_a_key(store: Store) -> None:
    with pytest.raises(InputError):
        await store.add_task(new("no key", dedup=DedupScope.EVER))
    assert await all_tasks(store) == []


@pytest.mark.parametrize(
    "bad",
    [
        new("", source_key="k"),
        new(" \t\n", source_key="k"),
        new("x", source_key="k", priority=0),
        new("x", source_key="k", priority=10),
        new("x", source_key="k", priority=-3),
        new("x", source_key="k", max_retries=-1),
    ],
    ids=["empty", "whitespace", "priority-0", "priority-10", "priority-negative", "max-retries-negative"],
)
@pytest.mark.parametrize("scope", list(DedupScope))
async def test_bad_input_raises_even_when_its_key_is_taken(store: Store, bad: NewTask, scope: DedupScope) -> None:
    """The dedup must never swallow a bad row as a duplicate."""
    await store.add_task(new("holder", source_key="k", dedup=scope))
    before = await all_tasks(store)
    with pytest.raises(InputError):
        await store.add_task(replace(bad, dedup=scope))
    with pytest.raises(InputError):
        await store.add_tasks([replace(bad, dedup=scope)], actor="sensor:s")
    assert await all_tasks(store) == before


async def test_missing_parent_or_dependency_raises_task_not_found(store: Store) -> None:
    with pytest.raises(TaskNotFound):
        await store.add_task(new("orphan", parent_id=404))
    with pytest.raises(TaskNotFound):
        await store.add_task(new("waits", depends_on=(404,)))
    assert await all_tasks(store) == []


async def test_dependencies_are_stored(store: Store) -> None:
    a = await store.add_task(new("a"))
    b = await store.add_task(new("b"))
    assert a.task_id is not None
    assert b.task_id is not None
    c = await store.add_task(new("c", depends_on=(b.task_id, a.task_id, a.task_id)))
    assert c.task_id is not None
    assert await store.dependencies(c.task_id) == sorted([a.task_id, b.task_id])
    assert await store.dependencies(a.task_id) == []
    assert (await store.get_task(c.task_id)).waiting_on == 2


async def test_a_cancelled_caller_leaves_no_half_written_add(store: Store) -> None:
    """Cancelling the awaiting coroutine mid-write leaves either the whole task (with
    its event) or nothing, and the store keeps working."""
    for i in range(20):
        adding = asyncio.create_task(store.add_task(new(f"maybe {i}", source_key=f"k{i}")))
        for _ in range(i % 4):
            await asyncio.sleep(0)
        adding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await adding
    for task in await all_tasks(store):
        assert [e.kind for e in await store.list_events(task.id)] == ["created"]
    after = await store.add_task(new("after", source_key="k0"))
    assert after.task_id is not None
    await assert_counts_match(store)
