"""Flood limits hold when several OS processes insert at once: the check and the
insert share one write transaction, so no two processes pass a limit together."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.guard import workers
from tests.processes import PROCESSES
from vigil.clock import ManualClock
from vigil.config import LimitsSettings
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow

JOIN_TIMEOUT_S = 90  # a safety net against a hung child, not a measurement


async def _race(
    path: Path, parent_id: int, limits: LimitsSettings, processes: int, tries: int
) -> list[tuple[int, int]]:
    barrier = PROCESSES.Barrier(processes)
    results = PROCESSES.Queue()
    procs = [
        PROCESSES.Process(target=workers.add_follow_ups, args=(str(path), parent_id, tries, limits, barrier, results))
        for _ in range(processes)
    ]
    for p in procs:
        p.start()
    reports = [results.get(timeout=JOIN_TIMEOUT_S) for _ in procs]
    for p in procs:
        p.join(JOIN_TIMEOUT_S)
        assert p.exitcode == 0
    return reports


async def test_children_limit_holds_across_processes(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "vigil.db"
    store = await SqliteStore.open(path, clock=clock)
    parent = await store.add_task(NewTask("parent"))
    assert parent.task_id is not None
    limits = LimitsSettings(max_depth=0, max_children=7, max_per_source_per_day=0)
    reports = await _race(path, parent.task_id, limits, processes=6, tries=5)
    assert sum(created for created, _ in reports) == 7
    assert sum(refused for _, refused in reports) == 6 * 5 - 7
    children = [t for t in await store.list_tasks(limit=100) if t.parent_id == parent.task_id]
    assert len(children) == 7
    rejected = (await store.loop_values())["rejected_inserts"]
    assert isinstance(rejected, dict)
    assert rejected["total"] == 23
    await store.close()


async def test_per_source_limit_holds_across_processes(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "vigil.db"
    store = await SqliteStore.open(path, clock=clock)
    parent = await store.add_task(NewTask("parent"))
    assert parent.task_id is not None
    limits = LimitsSettings(max_depth=0, max_children=0, max_per_source_per_day=11)
    reports = await _race(path, parent.task_id, limits, processes=5, tries=4)
    assert sum(created for created, _ in reports) == 11
    assert len([t for t in await store.list_tasks(limit=100) if t.source == "sensor:race"]) == 11
    await store.close()
