"""Contract: reading tasks back: get, list and paging, queue, counts, notes, costs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.store.contract import NO_BACKOFF, all_tasks, assert_counts_match, claim, ending, new, success
from vigil.clock import MS_PER_DAY, ManualClock
from vigil.errors import InputError
from vigil.models import CostRow, Outcome, OutcomeKind, TaskStatus
from vigil.store import CostGroup, Store


async def _mixed(store: Store) -> dict[TaskStatus, list[int]]:
    """Fourteen tasks in every status; ids by status."""
    by_status: dict[TaskStatus, list[int]] = {s: [] for s in TaskStatus}
    for i in range(14):
        added = await store.add_task(new(f"t{i}"))
        assert added.task_id is not None
    for final in [TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.COMPLETED, None, TaskStatus.CANCELED]:
        c = await claim(store)
        if final is not None:
            await store.record(c, ending(final), worker="w1")
    pending = [t.id for t in await store.list_tasks(statuses=[TaskStatus.PENDING])]
    await store.cancel(pending[0], actor="human")
    await store.close_task(pending[1], TaskStatus.BLOCKED, "waits", actor="agent")
    for task in await all_tasks(store):
        by_status[task.status].append(task.id)
    return by_status


async def test_list_filters_by_status_newest_first(store: Store) -> None:
    by_status = await _mixed(store)
    for status, ids in by_status.items():
        assert [t.id for t in await store.list_tasks(statuses=[status])] == sorted(ids, reverse=True)
    both = await store.list_tasks(statuses=[TaskStatus.FAILED, TaskStatus.CANCELED])
    assert [t.id for t in both] == sorted(by_status[TaskStatus.FAILED] + by_status[TaskStatus.CANCELED], reverse=True)
    assert [t.id for t in await store.list_tasks()] == list(range(14, 0, -1))[:50]


@pytest.mark.parametrize("statuses", [None, [TaskStatus.PENDING, TaskStatus.COMPLETED]])
async def test_keyset_paging_visits_every_task_once(store: Store, statuses: list[TaskStatus] | None) -> None:
    await _mixed(store)
    wanted = [t.id for t in await store.list_tasks(statuses=statuses, limit=1000)]
    seen: list[int] = []
    before_id: int | None = None
    while page := await store.list_tasks(statuses=statuses, limit=3, before_id=before_id):
        assert len(page) <= 3
        seen += [t.id for t in page]
        before_id = page[-1].id
    assert seen == wanted
    assert len(wanted) > 3


async def test_queue_is_the_dispatch_order(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    running = await store.add_task(new("running", priority=9))
    await claim(store)
    blocked = await store.add_task(new("blocked"))
    assert blocked.task_id is not None
    await store.close_task(blocked.task_id, TaskStatus.BLOCKED, "waits", actor="agent")
    later = await store.add_task(new("later, urgent", priority=1, scheduled_for=now + 1000))
    due_low = await store.add_task(new("due, low", priority=7, scheduled_for=now - 5))
    due_high = await store.add_task(new("due, high", priority=2))
    done = await store.add_task(new("done"))
    assert done.task_id is not None
    await store.cancel(done.task_id, actor="human")
    order = [t.id for t in await store.queue()]
    assert order == [running.task_id, due_high.task_id, due_low.task_id, later.task_id, blocked.task_id]


async def test_counts_stay_right_through_every_transition(store: Store, clock: ManualClock) -> None:
    await assert_counts_match(store)
    ids = []
    for i in range(6):
        added = await store.add_task(new(f"t{i}", source_key=f"k{i}"))
        assert added.task_id is not None
        ids.append(added.task_id)
    await store.add_task(new("dup", source_key="k0"))  # a dedup hit counts nothing
    await store.add_tasks([new("b1"), new("b2", source_key="k1")], actor="sensor:s")
    await assert_counts_match(store)
    steps: list[Callable[[], Awaitable[object]]] = [
        lambda: store.set_priority(ids[5], 1, actor="human"),
        lambda: store.defer(ids[4], clock.now_ms() + 10, actor="human"),
        lambda: store.cancel(ids[3], actor="human"),
        lambda: store.retry(ids[3], actor="human"),
        lambda: store.close_task(ids[2], TaskStatus.BLOCKED, "waits", actor="agent"),
        lambda: store.cancel(ids[2], actor="human"),
    ]
    for step in steps:
        await step()
        await assert_counts_match(store)
    outcomes = [TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED]
    for final in outcomes:
        c = await claim(store)
        await assert_counts_match(store)
        await store.cancel(c.task.id, actor="human")  # only a flag: no count moves
        await assert_counts_match(store)
        await store.record(c, ending(final), worker="w1")
        await assert_counts_match(store)
    c = await claim(store)
    await store.record(c, Outcome(OutcomeKind.STOPPED), worker="w1")  # back to pending, due now
    await assert_counts_match(store)
    c = await claim(store)
    await store.close_task(c.task.id, TaskStatus.COMPLETED, "agent did it", actor="agent")
    await assert_counts_match(store)
    await store.record(c, success(), worker="w1")
    await assert_counts_match(store)
    counts = await store.count_by_status()
    assert sum(counts.values()) == 7
    assert set(counts) == set(TaskStatus)


async def test_notes_are_kept_in_order(store: Store, clock: ManualClock) -> None:
    added = await store.add_task(new("t"))
    assert added.task_id is not None
    first = await store.add_note(added.task_id, "started on the parser", author="agent")
    clock.advance(1000)
    second = await store.add_note(added.task_id, "please also check [/] markup", author="human")
    notes = await store.list_notes(added.task_id)
    assert notes == [first, second]
    assert [(n.author, n.at) for n in notes] == [("agent", clock.now_ms() - 1000), ("human", clock.now_ms())]
    with pytest.raises(InputError):
        await store.add_note(added.task_id, "  ", author="human")
    assert await store.list_notes(added.task_id) == notes


async def _finish_with(
    store: Store, subject: str, *, skills: tuple[str, ...], source: str, model: str | None, cost: float, tokens: int
) -> None:
    await store.add_task(new(subject, skills=skills, source=source))
    c = await claim(store)
    outcome = success(cost_usd=cost, api_cost_usd=cost * 2, tokens_in=tokens, tokens_out=1, model=model)
    await store.record(c, outcome, worker="w1")


async def test_cost_rollups_by_day_skill_source_and_model(store: Store, clock: ManualClock) -> None:
    day1 = clock.now_ms()  # 2026-01-01T00:00Z
    await _finish_with(store, "a", skills=("git",), source="human", model="opus", cost=1.0, tokens=100)
    clock.advance(MS_PER_DAY)
    await _finish_with(store, "b", skills=("git", "web"), source="sensor:feeds", model="opus", cost=0.5, tokens=10)
    await _finish_with(store, "c", skills=(), source="sensor:feeds", model=None, cost=0.25, tokens=1)
    await store.add_task(new("never ran"))

    def table(rows: list[CostRow]) -> list[tuple[str, int, int, float, int]]:
        return [(r.key, r.runs, r.tasks, r.cost_usd, r.tokens_in) for r in rows]

    assert table(await store.cost_rollup(since_ms=day1, by=CostGroup.DAY)) == [
        ("2026-01-02", 2, 2, 0.75, 11),
        ("2026-01-01", 1, 1, 1.0, 100),
    ]
    assert table(await store.cost_rollup(since_ms=day1, by=CostGroup.SKILL)) == [
        ("git", 2, 2, 1.5, 110),
        ("web", 1, 1, 0.5, 10),
        ("(none)", 1, 1, 0.25, 1),
    ]
    assert table(await store.cost_rollup(since_ms=day1, by=CostGroup.SOURCE)) == [
        ("human", 1, 1, 1.0, 100),
        ("sensor:feeds", 2, 2, 0.75, 11),
    ]
    assert table(await store.cost_rollup(since_ms=day1, by=CostGroup.MODEL)) == [
        ("opus", 2, 2, 1.5, 110),
        ("(none)", 1, 1, 0.25, 1),
    ]
    since_day2 = await store.cost_rollup(since_ms=day1 + MS_PER_DAY, by=CostGroup.SOURCE)
    assert table(since_day2) == [("sensor:feeds", 2, 2, 0.75, 11)]
    opus = (await store.cost_rollup(since_ms=day1 + MS_PER_DAY, by=CostGroup.MODEL))[0]
    assert (opus.key, opus.api_cost_usd, opus.tokens_out) == ("opus", 1.0, 1)


async def test_a_skill_named_twice_is_kept_once(store: Store, clock: ManualClock) -> None:
    """A task's skills are a list without repeats: a skill named twice would load
    twice into the prompt and count its runs twice in the cost by skill."""
    since = clock.now_ms()
    added = await store.add_task(new("twice", skills=("git", "web", "git")))
    assert added.task_id is not None
    assert (await store.get_task(added.task_id)).skills == ("git", "web")
    c = await claim(store)
    await store.record(c, success(cost_usd=1.0), worker="w1")
    rows = await store.cost_rollup(since_ms=since, by=CostGroup.SKILL)
    assert [(r.key, r.runs, r.cost_usd) for r in rows] == [("git", 1, 1.0), ("web", 1, 1.0)]


async def test_cost_rollup_counts_every_run_of_a_retried_task(store: Store, clock: ManualClock) -> None:
    since = clock.now_ms()
    await store.add_task(new("flaky", skills=("git",)))
    c = await claim(store)
    await store.record(c, Outcome(OutcomeKind.TRANSIENT, cost_usd=0.5), worker="w1", policy=NO_BACKOFF)
    c = await claim(store)
    await store.record(c, success(cost_usd=0.25), worker="w1")
    [row] = await store.cost_rollup(since_ms=since, by=CostGroup.SKILL)
    assert (row.key, row.runs, row.tasks, row.cost_usd) == ("git", 2, 1, 0.75)
