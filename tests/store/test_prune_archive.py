"""Contract: what pruned tasks leave behind stays bounded. A prune folds the cost
archive's old hour rows into day rows without changing any roll-up or spend whose
window starts on a day boundary (or after the fold line), drops archive rows older
than ``costs_before_ms`` and retired keys older than ``keys_before_ms``, and
nothing else."""

from __future__ import annotations

import pytest

from tests.store.contract import new
from tests.store.test_prune import DAY_MS, HOUR_MS, _add, _history, _run
from vigil.clock import ManualClock
from vigil.models import CostRow, DedupScope, PruneResult
from vigil.store import CostGroup, Store

Totals = dict[tuple[CostGroup, int], list[tuple[object, ...]]]

# Every roll-up but the hour's, whose keys a fold changes (a folded day is one key).
BY_DAY_AND_GROUP = tuple(group for group in CostGroup if group is not CostGroup.HOUR)


def _comparable(r: CostRow) -> tuple[object, ...]:
    return (
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


async def _totals(store: Store, sinces: list[int], groups: tuple[CostGroup, ...] = tuple(CostGroup)) -> Totals:
    """The named roll-ups at every ``since`` plus the rolling spend, comparable."""
    seen: Totals = {}
    for since in sinces:
        for group in groups:
            rows = await store.cost_rollup(since_ms=since, by=group)
            seen[(group, since)] = [_comparable(r) for r in rows]
        seen[(CostGroup.DAY, -since - 1)] = [(pytest.approx(await store.spend_since(since)),)]
    return seen


async def _days_of_history(store: Store, clock: ManualClock, days: int) -> None:
    """``days`` rounds of ``_history`` (runs across hours and days, retries, chains)."""
    for _ in range(days):
        await _history(store, clock)
        clock.advance(2 * HOUR_MS)


async def test_folding_keeps_every_roll_up_and_the_spend_of_day_aligned_windows(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now_ms()  # midnight UTC
    await _days_of_history(store, clock, 4)
    clock.advance(HOUR_MS)
    now = clock.now_ms()
    line = now // DAY_MS * DAY_MS  # hours before the start of today are folded
    days = [start + n * DAY_MS for n in range((line - start) // DAY_MS + 1)]
    hours = [line + n * HOUR_MS for n in range((now - line) // HOUR_MS + 1)]
    before = await _totals(store, [0, *days, *hours])
    before_hours = await _totals(store, hours, (CostGroup.HOUR,))

    result = await store.prune(finished_before_ms=now, fold_before_ms=now, batch_size=3)

    assert result.tasks > 0
    assert result.folded > 0
    assert result.complete
    after = await _totals(store, [0, *days], BY_DAY_AND_GROUP)
    assert after == {k: v for k, v in before.items() if k in after}
    # after the fold line the archive still has hours: every group, the hour too
    assert await _totals(store, hours) == {k: v for k, v in before.items() if k[1] in hours or -k[1] - 1 in hours}
    assert await _totals(store, hours, (CostGroup.HOUR,)) == before_hours
    # a folded day is one key of the hour roll-up, the day's
    hour_keys = [r.key for r in await store.cost_rollup(since_ms=0, by=CostGroup.HOUR)]
    assert "2026-01-01" in hour_keys
    assert not any(k.startswith("2026-01-01T") for k in hour_keys)
    # idempotent: nothing is left to fold
    again = await store.prune(finished_before_ms=now, fold_before_ms=now)
    assert (again.tasks, again.folded) == (0, 0)


async def test_a_window_starting_inside_a_folded_day_counts_the_whole_day(store: Store, clock: ManualClock) -> None:
    midnight = clock.now_ms()
    first = await _add(store, new("early"))
    await _run(store, clock, first, usd=2.0, at_ms=HOUR_MS)
    clock.advance(10 * HOUR_MS)
    second = await _add(store, new("late"))
    await _run(store, clock, second, usd=3.0, at_ms=HOUR_MS)  # about 12:00
    clock.advance(3 * DAY_MS)
    noon = midnight + 12 * HOUR_MS

    hourly = await store.prune(finished_before_ms=clock.now_ms())
    assert hourly.folded == 0
    assert await store.spend_since(noon) == 3.0  # the hour holding noon counts whole
    folded = await store.prune(finished_before_ms=clock.now_ms(), fold_before_ms=clock.now_ms())

    assert folded.folded == 2
    assert await store.spend_since(noon) == 5.0  # errs on the side of spend
    assert await store.spend_since(midnight) == 5.0
    assert await store.spend_since(midnight + DAY_MS) == 0.0
    rows = await store.cost_rollup(since_ms=noon, by=CostGroup.DAY)
    assert [(r.key, r.runs, r.tasks, r.cost_usd) for r in rows] == [("2026-01-01", 2, 2, 5.0)]


async def test_a_task_with_runs_in_two_hours_of_a_folded_day_counts_once(store: Store, clock: ManualClock) -> None:
    await _history(store, clock)  # a follow-up retried an hour later, in the same day
    clock.advance(3 * DAY_MS)
    days_before = await store.cost_rollup(since_ms=0, by=CostGroup.DAY)

    await store.prune(finished_before_ms=clock.now_ms(), fold_before_ms=clock.now_ms(), batch_size=1)

    assert await store.cost_rollup(since_ms=0, by=CostGroup.DAY) == days_before
    # the hour roll-up of folded days: one key per day, each task counted once in it
    hours = await store.cost_rollup(since_ms=0, by=CostGroup.HOUR)
    assert [(r.key, r.runs, r.tasks, r.tokens_in) for r in hours] == [
        (r.key, r.runs, r.tasks, r.tokens_in) for r in days_before
    ]


async def test_old_archive_rows_go_and_newer_ones_stay(store: Store, clock: ManualClock) -> None:
    await _days_of_history(store, clock, 3)
    clock.advance(DAY_MS)
    now = clock.now_ms()
    keep_from = (now - 2 * DAY_MS) // DAY_MS * DAY_MS  # a day boundary
    before = await _totals(store, [keep_from, keep_from + DAY_MS], BY_DAY_AND_GROUP)
    assert await store.spend_since(0) > await store.spend_since(keep_from) > 0

    result = await store.prune(finished_before_ms=now, fold_before_ms=now, costs_before_ms=keep_from)

    assert result.costs > 0
    assert await _totals(store, [keep_from, keep_from + DAY_MS], BY_DAY_AND_GROUP) == before
    assert await store.spend_since(0) == pytest.approx(await store.spend_since(keep_from))
    assert (await store.prune(finished_before_ms=now, costs_before_ms=keep_from)).costs == 0


async def test_keys_retired_before_the_cutoff_may_be_used_again_and_no_others(store: Store, clock: ManualClock) -> None:
    old = await _add(store, new("welcome", source_key="welcome-mail", dedup=DedupScope.EVER))
    await _run(store, clock, old, usd=0.0)
    clock.advance(DAY_MS)
    assert (await store.prune(finished_before_ms=clock.now_ms())).tasks == 1
    retired_first = clock.now_ms()
    recent = await _add(store, new("report", source_key="report-1", dedup=DedupScope.EVER))
    await _run(store, clock, recent, usd=0.0)
    clock.advance(DAY_MS)
    assert (await store.prune(finished_before_ms=clock.now_ms())).tasks == 1

    preview = await store.prune(finished_before_ms=0, keys_before_ms=retired_first + 1, dry_run=True)
    result = await store.prune(finished_before_ms=0, keys_before_ms=retired_first + 1)

    assert (preview.keys, result.keys) == (1, 1)
    assert (await store.add_task(new("welcome again", source_key="welcome-mail", dedup=DedupScope.EVER))).created
    assert not (await store.add_task(new("report again", source_key="report-1", dedup=DedupScope.EVER))).created


async def test_a_key_retired_again_keeps_its_latest_retirement(store: Store, clock: ManualClock) -> None:
    for _ in range(2):  # an ``open`` key used by two tasks, pruned a day apart
        task_id = await _add(store, new("daily", source_key="daily"))
        await _run(store, clock, task_id, usd=0.0)
        clock.advance(DAY_MS)
        assert (await store.prune(finished_before_ms=clock.now_ms())).tasks == 1

    kept = await store.prune(finished_before_ms=0, keys_before_ms=clock.now_ms() - DAY_MS + 1)
    assert kept.keys == 0
    assert not (await store.add_task(new("ever", source_key="daily", dedup=DedupScope.EVER))).created
    assert (await store.prune(finished_before_ms=0, keys_before_ms=clock.now_ms() + 1)).keys == 1
    assert (await store.add_task(new("ever", source_key="daily", dedup=DedupScope.EVER))).created


async def test_a_dry_run_counts_the_archive_steps_as_a_prune_does_them(store: Store, clock: ManualClock) -> None:
    await _days_of_history(store, clock, 3)
    keyed = await _add(store, new("once", source_key="once", dedup=DedupScope.EVER))
    await _run(store, clock, keyed, usd=0.0)
    now = clock.now_ms() + 1
    await store.prune(finished_before_ms=now)  # hour rows, retired keys
    clock.advance(DAY_MS)
    now = clock.now_ms()

    async def prune(*, dry_run: bool) -> PruneResult:
        return await store.prune(
            finished_before_ms=0,
            fold_before_ms=now,
            costs_before_ms=now - 2 * DAY_MS,
            keys_before_ms=now,
            batch_size=2,
            dry_run=dry_run,
        )

    preview = await prune(dry_run=True)
    done = await prune(dry_run=False)

    assert (preview.costs, preview.keys) == (done.costs, done.keys)
    assert preview.costs > 0
    assert preview.keys > 0
    # the dry run counts the hour rows as they are: the ones dropped first are not folded
    assert done.folded == preview.folded - preview.costs
    assert done.folded > 0
    assert done.complete


async def test_max_batches_stops_inside_the_archive_steps_and_the_next_prune_goes_on(
    store: Store, clock: ManualClock
) -> None:
    await _days_of_history(store, clock, 3)
    clock.advance(3 * DAY_MS)
    now = clock.now_ms()
    await store.prune(finished_before_ms=now)
    before = await _totals(store, [0], (CostGroup.DAY, CostGroup.SENSOR))

    first = await store.prune(finished_before_ms=now, fold_before_ms=now, batch_size=2, max_batches=2)
    assert (first.tasks, first.complete) == (0, False)
    assert 0 < first.folded <= 4
    rest = await store.prune(finished_before_ms=now, fold_before_ms=now, batch_size=2)

    assert rest.complete
    assert rest.folded > 0
    assert await _totals(store, [0], (CostGroup.DAY, CostGroup.SENSOR)) == before


async def test_two_tasks_with_one_key_retire_it_once_in_one_batch(store: Store, clock: ManualClock) -> None:
    for _ in range(2):  # an ``open`` key used by two tasks, one after the other
        task_id = await _add(store, new("daily", source_key="daily"))
        await _run(store, clock, task_id, usd=0.0)
    clock.advance(DAY_MS)

    result = await store.prune(finished_before_ms=clock.now_ms())

    assert (result.tasks, result.batches) == (2, 1)
    assert (await store.prune(finished_before_ms=0, keys_before_ms=clock.now_ms() + 1)).keys == 1
