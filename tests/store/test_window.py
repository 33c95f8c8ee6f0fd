"""Contract: a window on the whole store (``task_window``): every filter and sort is
answered by the database, equal to filtering and sorting every task in Python, and
paging through it reaches every row exactly once. Also the history in finish order,
the relative deferral and the batch that reports each task."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.store.contract import all_tasks, claim, ending, new, success
from vigil.clock import ManualClock
from vigil.errors import InputError
from vigil.models import FINISHED_STATUSES, ApprovalState, LineResult, Task, TaskStatus
from vigil.states import STATES_BY_NAME, TASK_STATES, parse_states
from vigil.store import Store
from vigil.store.transaction import Engine, Sql, Tx
from vigil.task_query import Sort, TaskQuery

SUBJECTS = ("Deploy web", "deploy API", "tidy wiki", "Renew cert", "renew DNS", "web_50% done", "Zeta", "alpha")


async def _varied(store: Store, clock: ManualClock) -> None:
    """Thirty-odd tasks: every status, awaiting approval, due later, waiting on a
    dependency, several sources and skills, finished at times out of id order."""
    for n in range(24):
        await store.add_task(
            new(
                f"{SUBJECTS[n % len(SUBJECTS)]} {n}",
                priority=1 + (n * 5) % 9,
                source=("human", "sensor:inbox", "sensor:git", "task:3")[n % 4],
                skills=(("web",), ("web", "git"), (), ("triage",))[n % 4],
                scheduled_for=clock.now_ms() + (3_600_000 if n % 6 == 5 else -n * 1000),
                requires_approval=n % 7 == 6,
            )
        )
        clock.advance(1000)
    await store.add_task(new("waits on 1", depends_on=(1,)))
    # finished out of id order: the latest finish is not the highest id
    for final in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.COMPLETED, TaskStatus.COMPLETED):
        c = await claim(store)
        clock.advance(5000)
        await store.record(c, ending(final, cost_usd=0.5 * c.task.id), worker="w1")
    await claim(store)  # one running
    await store.cancel(2, actor="human")
    await store.close_task(4, TaskStatus.BLOCKED, "stuck", actor="agent")
    await store.retry(2, actor="human")
    await store.cancel(9, actor="human")


def _rank(task: Task, now: int) -> tuple[Any, ...]:
    """The dispatcher's order, written out in Python."""
    if task.status is TaskStatus.ACTIVE:
        return (0, 0, 0, 0, task.id)
    if task.status is TaskStatus.PENDING and task.waiting_on == 0 and task.scheduled_for <= now:
        return (1, task.priority, task.scheduled_for, 0, task.id)
    if task.status is TaskStatus.PENDING:
        return (2, 0, task.scheduled_for, task.priority, task.id)
    if task.status in FINISHED_STATUSES:
        return (4, 0, -(task.completed_at or 0), 0, -task.id)
    return (3, 0, task.scheduled_for, task.priority, task.id)


def _expected(tasks: list[Task], query: TaskQuery, now: int) -> list[Task]:
    def keep(t: Task) -> bool:
        if not any(s.matches(t) for s in query.shown_states):
            return False
        if any(w.lower() not in t.subject.lower() for w in query.words):
            return False
        if query.ids and t.id not in query.ids:
            return False
        if query.sources and not any(t.source.startswith(s) for s in query.sources):
            return False
        if not set(query.skills) <= set(t.skills):
            return False
        if query.priority is not None:
            op, value = query.priority
            compare: dict[str, Callable[[int, int], bool]] = {
                "<": int.__lt__, "<=": int.__le__, ">": int.__gt__, ">=": int.__ge__, "=": int.__eq__,
            }  # fmt: skip
            return compare[op](t.priority, value)
        return True

    columns: dict[Sort, Callable[[Task], Any]] = {
        Sort.PRIORITY: lambda t: t.priority,
        Sort.AGE: lambda t: 0,  # the order they were added: the id
        Sort.SUBJECT: lambda t: t.subject.lower(),
        Sort.SOURCE: lambda t: t.source,
        Sort.COST: lambda t: t.cost_usd,
        Sort.TRIES: lambda t: t.attempt_count,
        Sort.STATUS: lambda t: str(t.status),
        Sort.ID: lambda t: 0,
        Sort.SKILLS: lambda t: 0,  # compared as sets below
    }
    kept = [t for t in tasks if keep(t)]
    if query.sort is Sort.QUEUE:
        key: Callable[[Task], Any] = lambda t: _rank(t, now)  # noqa: E731
    else:
        key = lambda t: (columns[query.sort](t), t.id)  # noqa: E731
    return sorted(kept, key=key, reverse=query.descending)


QUERIES = [
    TaskQuery(),
    TaskQuery(states=parse_states("blocked")),
    TaskQuery(states=parse_states("approval")),
    TaskQuery(states=parse_states("blocked,approval,pending")),
    TaskQuery(states=parse_states("completed,failed")),
    TaskQuery(states=tuple(TASK_STATES)),
    TaskQuery(words=("deploy",)),
    TaskQuery(words=("RENEW", "1")),
    TaskQuery(words=("50%",)),  # a LIKE wildcard is matched as itself
    TaskQuery(words=("b_5",)),
    TaskQuery(ids=(3, 7, 12, 999)),
    TaskQuery(sources=("sensor:",)),
    TaskQuery(sources=("sensor:git", "task:")),
    TaskQuery(skills=("web",)),
    TaskQuery(skills=("web", "git")),
    TaskQuery(priority=("<", 4)),
    TaskQuery(priority=(">=", 6), states=tuple(TASK_STATES)),
    TaskQuery(priority=("=", 1)),
    *[TaskQuery(states=tuple(TASK_STATES), sort=sort, descending=d) for sort in Sort for d in (False, True)],
    TaskQuery(sort=Sort.SUBJECT, words=("e",)),
]


def _name(query: TaskQuery) -> str:
    parts = [",".join(s.name for s in query.states) or "open", *query.words, *map(str, query.ids)]
    parts += [*query.sources, *query.skills, "".join(map(str, query.priority or ())), str(query.sort)]
    return "-".join(parts) + ("-desc" if query.descending else "")


@pytest.mark.parametrize("query", QUERIES, ids=_name)
async def test_every_filter_and_sort_equals_doing_it_in_python(
    store: Store, clock: ManualClock, query: TaskQuery
) -> None:
    await _varied(store, clock)
    everything = await all_tasks(store)
    expected = _expected(everything, query, clock.now_ms())
    whole = await store.task_window(query, limit=1000)
    if query.sort is Sort.SKILLS:  # the JSON text orders alike only within one backend: same rows, total order
        assert sorted(t.id for t in whole.tasks) == sorted(t.id for t in expected)
    else:
        assert [t.id for t in whole.tasks] == [t.id for t in expected]
    assert whole.total == len(expected)
    # paged three at a time, every row comes exactly once, in order
    paged: list[int] = []
    for offset in itertools.count(0, 3):
        page = await store.task_window(query, offset=offset, limit=3)
        assert page.total == len(expected)
        if offset >= page.total:
            break
        assert page.offset == offset
        assert page.after == max(0, len(expected) - offset - 3)
        paged += [t.id for t in page.tasks]
    assert paged == [t.id for t in whole.tasks]


async def test_counts_are_per_state_and_approval_is_its_own(store: Store, clock: ManualClock) -> None:
    await _varied(store, clock)
    everything = await all_tasks(store)
    window = await store.task_window(TaskQuery())
    assert window.counts == {s.name: sum(s.matches(t) for t in everything) for s in TASK_STATES}
    awaiting = [t.id for t in everything if t.awaiting_approval]
    assert awaiting
    assert window.counts["approval"] == len(awaiting)
    assert window.counts["blocked"] > len(awaiting)  # the stuck one too: blocked is the whole status
    assert [t.id for t in (await store.task_window(TaskQuery(states=(STATES_BY_NAME["approval"],)))).tasks] == sorted(
        awaiting, key=lambda i: next(t for t in everything if t.id == i).scheduled_for
    )
    active = [t.id for t in everything if t.status is TaskStatus.ACTIVE]
    assert [t.id for t in window.active] == active
    due = [t for t in everything if t.status is TaskStatus.PENDING and not t.waiting_on]
    due = [t for t in due if t.scheduled_for <= clock.now_ms() and t.claimed_by is None]
    assert window.next_id == min(due, key=lambda t: (t.priority, t.scheduled_for, t.id)).id
    assert window.next_due_at == await store.next_due_at()


async def test_recent_rows_are_the_latest_finishes_not_the_highest_ids(store: Store, clock: ManualClock) -> None:
    for n in range(3):
        await store.add_task(new(f"t{n}"))
    first, second = await claim(store), await claim(store)
    clock.advance(1000)
    await store.record(second, success(), worker="w1")
    clock.advance(1000)
    await store.record(first, ending(TaskStatus.FAILED), worker="w1")
    window = await store.task_window(TaskQuery(), recent_since_ms=clock.now_ms() - 60_000)
    assert [t.id for t in window.recent] == [first.task.id, second.task.id]
    assert (await store.task_window(TaskQuery(), recent_since_ms=clock.now_ms() + 1)).recent == ()
    assert (await store.task_window(TaskQuery())).recent == ()


async def test_an_offset_past_the_end_shows_the_last_page(store: Store) -> None:
    for n in range(7):
        await store.add_task(new(f"t{n}"))
    window = await store.task_window(TaskQuery(), offset=50, limit=3)
    assert (window.offset, [t.id for t in window.tasks], window.total, window.after) == (4, [5, 6, 7], 7, 0)
    with pytest.raises(InputError):
        await store.task_window(TaskQuery(), offset=-1)


async def test_history_is_in_finish_order_and_pages_by_finish_time(store: Store, clock: ManualClock) -> None:
    for n in range(6):
        await store.add_task(new(f"job {n}" if n % 2 else f"other {n}"))
    claims = [await claim(store) for _ in range(6)]
    finished_order = [claims[i] for i in (3, 0, 5, 1, 4, 2)]
    for n, c in enumerate(finished_order):
        clock.advance(1000 if n != 3 else 0)  # two finish in the same millisecond: the higher id first
        await store.record(c, success(summary=f"result {c.task.id}"), worker="w1")
    latest_first = [t.id for t in sorted(await all_tasks(store), key=lambda t: (t.completed_at, t.id), reverse=True)]
    pages: list[int] = []
    before = None
    while True:
        page = await store.finished_tasks(before=before, limit=4)
        if not page:
            break
        pages += [t.id for t in page]
        assert page[-1].completed_at is not None
        before = (page[-1].completed_at, page[-1].id)
    assert pages == latest_first
    found = await store.finished_tasks("JOB")
    assert [t.id for t in found] == [i for i in latest_first if i % 2 == 0]
    assert [t.id for t in await store.finished_tasks("result 3")] == [3]


async def test_defer_by_counts_from_the_due_time_or_from_now(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    later = (await store.add_task(new("due in 2h", scheduled_for=now + 7_200_000))).task_id
    due = (await store.add_task(new("due an hour ago", scheduled_for=now - 3_600_000))).task_id
    assert later is not None
    assert due is not None
    assert (await store.defer_by(later, 3_600_000, actor="human")).scheduled_for == now + 3 * 3_600_000
    assert (await store.defer_by(due, 3_600_000, actor="human")).scheduled_for == now + 3_600_000
    with pytest.raises(InputError):
        await store.defer_by(due, 0, actor="human")


async def test_add_each_says_what_became_of_each_task(store: Store) -> None:
    held = (await store.add_task(new("holds k1", source_key="k1"))).task_id
    results = await store.add_each(
        [
            new("a"),
            new("dup of an old one", source_key="k1"),
            new("k2 first", source_key="k2"),
            new("k2 again, same batch", source_key="k2"),
            new("orphan", parent_id=9999),
            new("b"),
        ],
        actor="human",
    )
    created = [r.task_id for r in results if r.outcome == "created"]
    assert [r.outcome for r in results] == ["created", "existing", "created", "existing", "refused", "created"]
    assert results[1] == LineResult("existing", held)
    assert results[3] == LineResult("existing", created[1])
    assert results[4].reason is not None
    assert "9999" in results[4].reason
    assert [t.subject for t in await all_tasks(store)][:3] == ["b", "k2 first", "a"]


async def test_the_approval_state_is_the_approval_column(store: Store) -> None:
    task_id = (await store.add_task(new("needs a yes", requires_approval=True))).task_id
    assert task_id is not None
    task = await store.get_task(task_id)
    assert task.approval == ApprovalState.PENDING
    assert [s.name for s in TASK_STATES if s.matches(task)] == ["blocked", "approval"]


def _commit_elsewhere(location: Path | str) -> None:
    """Add a task through a connection of its own, as another process would."""
    sql = "UPDATE tasks SET status = 'canceled', completed_at = 1, updated_at = 1 WHERE id = 1"
    if isinstance(location, Path):
        conn = sqlite3.connect(location, isolation_level=None)
        try:
            conn.execute(sql)
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(location, autocommit=True) as pg:
        pg.execute(sql)


async def test_a_snapshot_does_not_see_a_commit_made_during_it(store: Store, location: Path | str) -> None:
    """The reads of one window agree: a task that finishes while the window is read
    is open in all of them, or finished in all (the queue once showed it twice)."""
    await store.add_task(new("finishes meanwhile"))
    engine: Engine = store.engine

    def body(tx: Tx) -> tuple[object, object]:
        before = tx.one(Sql("SELECT status FROM tasks WHERE id = 1"))
        _commit_elsewhere(location)
        after = tx.one(Sql("SELECT status FROM tasks WHERE id = 1"))
        return (before or {})["status"], (after or {})["status"]

    assert await asyncio.to_thread(engine.snapshot, body) == ("pending", "pending")
    assert (await store.get_task(1)).status is TaskStatus.CANCELED
