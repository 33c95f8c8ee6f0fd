"""Contract: the cost rollup by sensor follows each task's parent chain to the sensor
that started it."""

from __future__ import annotations

from tests.store.contract import claim, new, success
from vigil.store import CostGroup, Store


async def _run(store: Store, task_id: int, usd: float) -> None:
    got = await claim(store)
    assert got.task.id == task_id
    await store.record(got, success(cost_usd=usd, tokens_in=10), worker="w1")


async def test_follow_ups_count_for_the_sensor_that_started_the_chain(store: Store) -> None:
    root = await store.add_task(new("new feed entry", source="sensor:feeds"))
    assert root.task_id is not None
    await _run(store, root.task_id, 1.0)
    child = await store.add_task(new("follow-up", source=f"task:{root.task_id}", parent_id=root.task_id))
    assert child.task_id is not None
    await _run(store, child.task_id, 2.0)
    grandchild = await store.add_task(new("deeper", source=f"task:{child.task_id}", parent_id=child.task_id))
    assert grandchild.task_id is not None
    await _run(store, grandchild.task_id, 4.0)
    mail = await store.add_task(new("inbox", source="sensor:mail"))
    assert mail.task_id is not None
    await _run(store, mail.task_id, 0.5)
    by_hand = await store.add_task(new("by hand"))
    assert by_hand.task_id is not None
    await _run(store, by_hand.task_id, 0.25)

    rows = await store.cost_rollup(since_ms=0, by=CostGroup.SENSOR)
    assert [(r.key, r.tasks, r.runs, r.cost_usd, r.tokens_in) for r in rows] == [
        ("feeds", 3, 3, 7.0, 30),
        ("mail", 1, 1, 0.5, 10),
        ("(none)", 1, 1, 0.25, 10),
    ]
