"""A cost archive as it was before it kept the account (SQLite schema v8, PostgreSQL
v10), and what an upgraded store makes of it: the same totals, every archived run
under the account ``(none)``, and prunes and folds that go on beside those rows."""

from __future__ import annotations

import pytest

from tests.store.contract import claim, new, success
from vigil.clock import ManualClock
from vigil.store import CostGroup, Store

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

COLUMNS = (
    "start_ms, span_ms, skills, source, model, sensor, runs, tasks_last, tasks_hour, tasks_day, tasks_model, "
    "cost_usd, api_cost_usd, tokens_in, tokens_out, cache_read_tokens, cache_write_tokens"
)

# Every number the archive holds, summed: the same before and after the upgrade.
SQL_SUMS = """
SELECT count(*), sum(runs), sum(tasks_last), sum(tasks_hour), sum(tasks_day), sum(tasks_model), sum(cost_usd),
       sum(api_cost_usd), sum(tokens_in), sum(tokens_out), sum(cache_read_tokens), sum(cache_write_tokens)
FROM cost_archive
"""

# Rows the upgrade did not give the account '(none)' and their tasks_last as tasks_account.
SQL_NOT_NONE = "SELECT count(*) FROM cost_archive WHERE account <> '(none)' OR tasks_account <> tasks_last"


def rows_before(today_ms: int) -> list[tuple[object, ...]]:
    """Archive rows (``COLUMNS``): yesterday at 09:00, a task's three runs on two
    models (a retry in the hour); the day before, two human tasks, folded."""
    nine = today_ms - DAY_MS + 9 * HOUR_MS
    feeds = ('["write"]', "sensor:feeds")
    return [
        (nine, HOUR_MS, *feeds, "sonnet", "feeds", 2, 1, 1, 1, 1, 1.5, 3.0, 300, 30, 14, 6),
        (nine, HOUR_MS, *feeds, "haiku", "feeds", 1, 0, 0, 0, 1, 0.5, 1.0, 40, 0, 0, 0),
        (today_ms - 2 * DAY_MS, DAY_MS, "[]", "human", "(none)", "(none)", 2, 2, 2, 2, 2, 0.25, 0.5, 200, 20, 0, 0),
    ]


async def assert_upgraded_archive_counts(store: Store, clock: ManualClock) -> None:
    """The store upgraded from ``rows_before(clock.now_ms())`` counts them as
    before, under the account ``(none)``; a task run on an account is pruned beside
    them and yesterday's hours fold, and the account roll-up stays the same."""
    by_source = await store.cost_rollup(since_ms=0, by=CostGroup.SOURCE)
    assert [(r.key, r.runs, r.tasks, r.cost_usd) for r in by_source] == [
        ("sensor:feeds", 3, 1, 2.0),
        ("human", 2, 2, 0.25),
    ]
    by_account = await store.cost_rollup(since_ms=0, by=CostGroup.ACCOUNT)
    assert [(r.key, r.runs, r.tasks, r.cost_usd, r.tokens_in) for r in by_account] == [("(none)", 5, 3, 2.25, 540)]
    assert await store.spend_since(0) == pytest.approx(2.25)

    task = await store.add_task(new("on an account"))
    got = await claim(store)
    assert got.task.id == task.task_id
    await store.set_executor(got, "claude")
    await store.record(got, success(cost_usd=1.0, tokens_in=10, account="work"), worker="w1")
    clock.advance(HOUR_MS)
    before = await store.cost_rollup(since_ms=0, by=CostGroup.ACCOUNT)
    assert [(r.key, r.runs, r.tasks) for r in before] == [("(none)", 5, 3), ("claude:work", 1, 1)]

    result = await store.prune(finished_before_ms=clock.now_ms(), fold_before_ms=clock.now_ms())

    assert (result.tasks, result.folded) == (1, 2)
    assert await store.cost_rollup(since_ms=0, by=CostGroup.ACCOUNT) == before
    assert await store.spend_since(0) == pytest.approx(3.25)
