"""Contract: history search (keyset-paged) and the hourly cost rollup the TUI charts."""

from __future__ import annotations

from tests.store.contract import claim, new, success
from vigil.clock import ManualClock
from vigil.models import TaskStatus
from vigil.store import CostGroup, Store


async def test_search_matches_subject_description_source_and_summary(store: Store) -> None:
    a = (await store.add_task(new("deploy the web site"))).task_id
    b = (await store.add_task(new("other", description="mentions DEPLOY in caps"))).task_id
    c = (await store.add_task(new("third", source="sensor:deployments"))).task_id
    await store.add_task(new("unrelated"))
    found = await store.search_tasks("deploy")
    assert [t.id for t in found] == [c, b, a]


async def test_search_is_keyset_paged_and_filtered_by_status(store: Store) -> None:
    ids: list[int] = []
    for i in range(5):
        task_id = (await store.add_task(new(f"report {i}"))).task_id
        assert task_id is not None
        ids.append(task_id)
    await store.cancel(ids[1], actor="human")
    await store.cancel(ids[3], actor="human")
    first = await store.search_tasks("report", statuses=[TaskStatus.CANCELED], limit=1)
    assert [t.id for t in first] == [ids[3]]
    second = await store.search_tasks("report", statuses=[TaskStatus.CANCELED], limit=1, before_id=ids[3])
    assert [t.id for t in second] == [ids[1]]
    assert await store.search_tasks("report", statuses=[TaskStatus.CANCELED], before_id=ids[1]) == []


async def test_search_treats_wildcards_literally(store: Store) -> None:
    plain = (await store.add_task(new("100 percent done"))).task_id
    literal = (await store.add_task(new("100% done_now"))).task_id
    assert [t.id for t in await store.search_tasks("100%")] == [literal]
    assert [t.id for t in await store.search_tasks("e_n")] == [literal]
    assert plain is not None
    assert [t.id for t in await store.search_tasks("percent")] == [plain]


async def test_cost_rollup_by_hour(store: Store, clock: ManualClock) -> None:
    clock.set(1_767_225_600_000)  # 2026-01-01T00:00Z
    await store.add_task(new("one"))
    c1 = await claim(store)
    await store.record(c1, success(cost_usd=0.5, tokens_in=10), worker="w1")
    clock.advance(3_600_000 + 5_000)
    await store.add_task(new("two"))
    c2 = await claim(store)
    await store.record(c2, success(cost_usd=0.25, tokens_out=7), worker="w1")
    rows = await store.cost_rollup(since_ms=0, by=CostGroup.HOUR)
    assert [(r.key, r.cost_usd, r.tokens_in, r.tokens_out) for r in rows] == [
        ("2026-01-01T01", 0.25, 0, 7),
        ("2026-01-01T00", 0.5, 10, 0),
    ]
