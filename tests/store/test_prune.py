"""Contract: ``prune`` deletes old finished tasks in bounded batches, never one that
is open, still has a child or is still depended on, and leaves every cost roll-up
and the rolling spend as they were."""

from __future__ import annotations

import pytest

from tests.store.contract import NO_BACKOFF, all_tasks, assert_counts_match, claim, new, success
from vigil.clock import ManualClock
from vigil.errors import InputError, TaskNotFound
from vigil.models import DedupScope, NewTask, Outcome, OutcomeKind, TaskStatus
from vigil.store import CostGroup, Store

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


async def _run(
    store: Store,
    clock: ManualClock,
    task_id: int,
    *,
    usd: float,
    model: str | None = "sonnet",
    at_ms: int = 0,
    account: tuple[str, str] | None = None,
) -> None:
    """Claim ``task_id`` (it must be next), advance ``at_ms``, finish it completed
    (on ``account``: executor and account, else no agent CLI's)."""
    got = await claim(store)
    assert got.task.id == task_id
    if account is not None:
        await store.set_executor(got, account[0])
    clock.advance(at_ms)
    outcome = success(
        cost_usd=usd,
        api_cost_usd=usd * 2,
        tokens_in=100,
        tokens_out=10,
        cache_read_tokens=7,
        cache_write_tokens=3,
        model=model,
        transcript_path=f"logs/runs/{task_id}-{got.attempt}.jsonl",
        account=None if account is None else account[1],
    )
    await store.record(got, outcome, worker="w1")


async def _retried_then_done(store: Store, clock: ManualClock, task_id: int) -> None:
    """Two attempts an hour and more apart, with different models and accounts on
    two executors (a retry that fell back)."""
    got = await claim(store)
    assert got.task.id == task_id
    await store.set_executor(got, "claude")
    clock.advance(60_000)
    crashed = Outcome(
        OutcomeKind.TRANSIENT, cost_usd=0.5, tokens_in=40, model="haiku", transcript_path="logs/a.jsonl", account="work"
    )
    await store.record(got, crashed, worker="w1", policy=NO_BACKOFF)
    clock.advance(HOUR_MS + 5 * 60_000)
    await _run(store, clock, task_id, usd=1.25, model="sonnet", at_ms=60_000, account=("codex", "default"))


async def _add(store: Store, new_task: NewTask) -> int:
    result = await store.add_task(new_task)
    assert result.task_id is not None
    return result.task_id


async def _history(store: Store, clock: ManualClock) -> dict[str, int]:
    """A day and a half of varied work: sensor chains, skills, models, accounts on
    two executors (and runs with none), retries across hours and days, a task with
    no runs, some cheap human tasks."""
    ids: dict[str, int] = {}
    ids["feed"] = await _add(store, new("feed entry", source="sensor:feeds", skills=("research", "write")))
    await _run(store, clock, ids["feed"], usd=1.0, at_ms=10 * 60_000, account=("claude", "work"))
    ids["child"] = await _add(
        store, new("follow-up", source=f"task:{ids['feed']}", parent_id=ids["feed"], skills=("write",))
    )
    await _retried_then_done(store, clock, ids["child"])
    ids["grandchild"] = await _add(
        store, new("deeper", source=f"task:{ids['child']}", parent_id=ids["child"], skills=())
    )
    clock.advance(20 * HOUR_MS)  # into the next UTC day
    await _run(store, clock, ids["grandchild"], usd=0.75, model=None)
    ids["mail"] = await _add(store, new("inbox", source="sensor:mail", skills=("triage",)))
    await _run(store, clock, ids["mail"], usd=0.5, model="haiku", at_ms=2 * HOUR_MS, account=("codex", "default"))
    ids["hand"] = await _add(store, new("by hand"))
    await _run(store, clock, ids["hand"], usd=0.25)
    ids["canceled"] = await _add(store, new("never ran"))
    await store.cancel(ids["canceled"], actor="human")
    clock.advance(3 * HOUR_MS)
    return ids


async def _totals(store: Store, sinces: list[int]) -> dict[tuple[CostGroup, int], list[tuple[object, ...]]]:
    """Every roll-up group at every ``since`` plus the rolling spend, comparable."""
    seen: dict[tuple[CostGroup, int], list[tuple[object, ...]]] = {}
    for since in sinces:
        for group in CostGroup:
            rows = await store.cost_rollup(since_ms=since, by=group)
            seen[(group, since)] = [
                (
                    r.key,
                    r.runs,
                    r.tasks,
                    pytest.approx(r.cost_usd),
                    pytest.approx(r.api_cost_usd),
                    r.tokens_in,
                    r.tokens_out,
                    r.cache_read_tokens,
                    r.cache_write_tokens,
                )
                for r in rows
            ]
        seen[(CostGroup.DAY, -since - 1)] = [(pytest.approx(await store.spend_since(since)),)]
    return seen


async def test_every_roll_up_and_the_spend_are_the_same_after_a_prune(store: Store, clock: ManualClock) -> None:
    start = clock.now_ms()
    ids = await _history(store, clock)
    # a second, later history that stays: archived and live runs then share groups
    cutoff = clock.now_ms()
    clock.advance(HOUR_MS)
    kept = await _history(store, clock)
    end = clock.now_ms()
    # the whole history, and windows starting on hour boundaries inside both parts
    sinces = [0, start + HOUR_MS, start + 21 * HOUR_MS, cutoff, cutoff + 2 * HOUR_MS, end - 4 * HOUR_MS]
    before = await _totals(store, sinces)
    assert before[(CostGroup.SENSOR, 0)][0][:3] == ("feeds", 8, 6)  # the chains count for their sensor
    # a task that fell back to another account counts once under each
    assert [row[:3] for row in before[(CostGroup.ACCOUNT, 0)]] == [
        ("codex:default", 4, 4),
        ("claude:work", 4, 4),
        ("(none)", 4, 4),
    ]

    result = await store.prune(finished_before_ms=cutoff)

    assert result.tasks == len(ids)
    assert result.complete
    for task_id in ids.values():
        with pytest.raises(TaskNotFound):
            await store.get_task(task_id)
    assert {t.id for t in await all_tasks(store)} == set(kept.values())
    assert await _totals(store, sinces) == before
    await assert_counts_match(store)


async def test_an_archived_hour_counts_whole_from_a_window_starting_inside_it(store: Store, clock: ManualClock) -> None:
    hour = clock.now_ms()  # the top of a UTC hour
    task_id = await _add(store, new("early in the hour"))
    await _run(store, clock, task_id, usd=2.0, at_ms=10 * 60_000)
    clock.advance(DAY_MS)
    inside = hour + 30 * 60_000  # after the run, inside its hour
    assert await store.spend_since(inside) == 0.0

    await store.prune(finished_before_ms=clock.now_ms())

    assert await store.spend_since(inside) == 2.0
    assert await store.spend_since(hour + HOUR_MS) == 0.0
    rows = await store.cost_rollup(since_ms=inside, by=CostGroup.HOUR)
    assert [(r.runs, r.tasks, r.cost_usd) for r in rows] == [(1, 1, 2.0)]


async def test_prune_deletes_runs_events_notes_dependencies_and_returns_transcripts(
    store: Store, clock: ManualClock
) -> None:
    first = await _add(store, new("first"))
    await _run(store, clock, first, usd=0.1)
    second = await _add(store, new("second", depends_on=(first,)))
    await store.add_note(second, "halfway there", author="agent")
    await _run(store, clock, second, usd=0.1)
    clock.advance(DAY_MS)

    result = await store.prune(finished_before_ms=clock.now_ms())

    assert (result.tasks, result.runs, result.notes, result.dependencies) == (2, 2, 1, 1)
    assert result.events == 6  # created, active, completed for each
    assert sorted(result.transcripts) == sorted([f"logs/runs/{first}-1.jsonl", f"logs/runs/{second}-1.jsonl"])
    assert await store.list_runs(second) == []
    assert await store.list_events(second) == []
    assert await store.list_notes(second) == []
    assert await store.dependencies(second) == []


async def test_open_recent_depended_on_and_parent_tasks_stay(store: Store, clock: ManualClock) -> None:
    old_open = await _add(store, new("old but pending", scheduled_for=clock.now_ms() + 10 * DAY_MS))
    needed = await _add(store, new("a dependency"))
    await _run(store, clock, needed, usd=0.0)
    parent = await _add(store, new("a parent"))
    await _run(store, clock, parent, usd=0.0)
    child = await _add(store, new("its open child", parent_id=parent, scheduled_for=clock.now_ms() + 10 * DAY_MS))
    due = clock.now_ms() + DAY_MS + HOUR_MS  # after the cutoff
    waiting = await _add(store, new("waits on the dependency", depends_on=(needed,), scheduled_for=due))
    clock.advance(DAY_MS)
    cutoff = clock.now_ms()
    recent = await _add(store, new("finished after the cutoff"))
    await _run(store, clock, recent, usd=0.0)
    clock.advance(DAY_MS)  # now waiting is due: it finishes after the cutoff
    await _run(store, clock, waiting, usd=0.0)

    result = await store.prune(finished_before_ms=cutoff)

    assert result.tasks == 0
    assert {t.id for t in await all_tasks(store)} == {old_open, needed, parent, child, waiting, recent}


async def test_a_chain_freed_by_its_children_goes_in_one_prune(store: Store, clock: ManualClock) -> None:
    chain = [await _add(store, new("root", source="sensor:feeds"))]
    await _run(store, clock, chain[0], usd=0.5)
    for depth in range(4):
        chain.append(await _add(store, new(f"follow-up {depth}", parent_id=chain[-1])))
        await _run(store, clock, chain[-1], usd=0.5)
    keeper = await _add(store, new("kept: its child is recent"))
    await _run(store, clock, keeper, usd=0.5)
    clock.advance(DAY_MS)
    cutoff = clock.now_ms()
    young = await _add(store, new("young child", parent_id=keeper))
    await _run(store, clock, young, usd=0.5)
    before = await store.cost_rollup(since_ms=0, by=CostGroup.SENSOR)

    # batches of one: each parent is freed only after its child went
    result = await store.prune(finished_before_ms=cutoff, batch_size=1)

    assert result.tasks == len(chain)
    assert result.complete
    assert {t.id for t in await all_tasks(store)} == {keeper, young}
    assert await store.cost_rollup(since_ms=0, by=CostGroup.SENSOR) == before


async def test_batches_are_bounded_and_a_second_prune_finds_nothing(store: Store, clock: ManualClock) -> None:
    for n in range(25):
        task_id = await _add(store, new(f"t{n}"))
        await _run(store, clock, task_id, usd=0.01)
    clock.advance(DAY_MS)
    cutoff = clock.now_ms()

    first = await store.prune(finished_before_ms=cutoff, batch_size=10, max_batches=1)
    assert (first.tasks, first.batches, first.complete) == (10, 1, False)
    assert len(await all_tasks(store)) == 15
    second = await store.prune(finished_before_ms=cutoff, batch_size=10, max_batches=1)
    assert (second.tasks, second.complete) == (10, False)
    rest = await store.prune(finished_before_ms=cutoff, batch_size=10)
    assert rest.tasks == 5
    assert rest.complete
    assert rest.batches >= 1
    again = await store.prune(finished_before_ms=cutoff, batch_size=10)
    assert (again.tasks, again.runs, again.events, again.transcripts, again.complete) == (0, 0, 0, (), True)
    assert await all_tasks(store) == []
    await assert_counts_match(store)


async def test_a_dry_run_reports_what_a_prune_deletes_and_deletes_nothing(store: Store, clock: ManualClock) -> None:
    ids = await _history(store, clock)
    cutoff = clock.now_ms()
    await _history(store, clock)
    tasks_before = await all_tasks(store)

    preview = await store.prune(finished_before_ms=cutoff, dry_run=True)

    assert await all_tasks(store) == tasks_before
    done = await store.prune(finished_before_ms=cutoff, batch_size=2)
    assert preview.tasks == len(ids)
    assert (preview.tasks, preview.runs, preview.events, preview.notes, preview.dependencies) == (
        done.tasks,
        done.runs,
        done.events,
        done.notes,
        done.dependencies,
    )
    assert sorted(preview.transcripts) == sorted(done.transcripts)


async def test_an_ever_key_stays_used_after_its_task_is_pruned(store: Store, clock: ManualClock) -> None:
    once = await _add(store, new("once", source_key="welcome-mail", dedup=DedupScope.EVER))
    await _run(store, clock, once, usd=0.0)
    reused = await _add(store, new("open scope", source_key="daily-report"))
    await _run(store, clock, reused, usd=0.0)
    clock.advance(DAY_MS)
    assert (await store.prune(finished_before_ms=clock.now_ms())).tasks == 2

    again = await store.add_task(new("once more", source_key="welcome-mail", dedup=DedupScope.EVER))
    assert not again.created
    # an ``open`` key is free again once its task finished, pruned or not
    assert (await store.add_task(new("next report", source_key="daily-report"))).created
    # and an ``ever`` add of a key a pruned open-scope task used is refused too
    clock.advance(DAY_MS)
    assert not (await store.add_task(new("ever", source_key="daily-report", dedup=DedupScope.EVER))).created


async def test_old_events_of_kept_tasks_go_when_asked(store: Store, clock: ManualClock) -> None:
    kept = await _add(store, new("long-lived", scheduled_for=clock.now_ms() + 30 * DAY_MS))
    await store.set_priority(kept, 2, actor="human")
    clock.advance(10 * DAY_MS)
    events_cutoff = clock.now_ms()
    await store.set_priority(kept, 3, actor="human")
    assert len(await store.list_events(kept)) == 3

    result = await store.prune(finished_before_ms=0, events_before_ms=events_cutoff)

    assert (result.tasks, result.events) == (0, 2)
    assert [(e.kind, e.to_value) for e in await store.list_events(kept)] == [("priority", "3")]
    assert (await store.get_task(kept)).priority == 3


@pytest.mark.parametrize("bad", [{"batch_size": 0}, {"max_batches": 0}])
async def test_bad_batch_limits_are_refused(store: Store, bad: dict[str, int]) -> None:
    with pytest.raises(InputError):
        await store.prune(finished_before_ms=0, **bad)  # type: ignore[arg-type]


async def test_a_task_its_agent_closed_stays_until_the_dispatcher_records_the_run(
    store: Store, clock: ManualClock
) -> None:
    task_id = await _add(store, new("closed by its agent"))
    got = await claim(store)
    await store.close_task(task_id, TaskStatus.COMPLETED, "done", actor="agent")
    clock.advance(DAY_MS)  # the run is still being recorded: a slow or dead dispatcher

    preview = await store.prune(finished_before_ms=clock.now_ms(), dry_run=True)
    result = await store.prune(finished_before_ms=clock.now_ms())

    assert (preview.tasks, result.tasks) == (0, 0)
    await store.record(got, success(cost_usd=0.5), worker="w1")
    clock.advance(DAY_MS)
    assert (await store.prune(finished_before_ms=clock.now_ms())).tasks == 1
    assert await store.spend_since(0) == 0.5
