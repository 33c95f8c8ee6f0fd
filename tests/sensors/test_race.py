"""Two sensor runners in two processes on one database, racing the same keys: the
database drops every duplicate, and neither process fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sensors.racers import run_racers
from vigil.models import TaskStatus
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow

SENSOR = """
import time
from sensors import FoundTask, SensorContext

async def racer(ctx: SensorContext) -> list[FoundTask]:
    # Both processes compute the same keys within the same 20 ms slot.
    slot = int(time.time() * 50)
    return [FoundTask(key=f"{slot}-{i}", subject=f"slot {slot} item {i}") for i in range(20)]
"""


async def test_two_processes_racing_the_same_keys_create_no_duplicate(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "racer.py").write_text(SENSOR)
    (home / "vigil.toml").write_text(
        '[limits]\nmax_per_source_per_day = 0\n\n[[sensors]]\nuse = "racer.py:racer"\nevery = "1m"\n'
    )
    results = run_racers(home, 40)

    assert all(r["statuses"] == ["ok"] and r["rejected"] == 0 for r in results), results
    store = await SqliteStore.open(home / "data" / "vigil.db")
    try:
        tasks = await store.list_tasks(limit=100_000)
        counts = await store.count_by_status()
    finally:
        await store.close()
    keys = [t.source_key for t in tasks]
    assert len(keys) == len(set(keys))  # no duplicate task
    assert sum(r["created"] for r in results) == len(tasks) == counts[TaskStatus.PENDING]
    assert sum(r["created"] + r["ignored"] for r in results) == 2 * 40 * 20
    # The two really raced: both saw keys the other had already inserted.
    assert all(r["ignored"] > 0 for r in results)
