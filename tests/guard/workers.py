"""Code that runs in other OS processes during the flood-limit race tests
(``multiprocessing`` targets, forked from the fork server of ``tests.processes``;
each opens its own connection)."""

from __future__ import annotations

import asyncio
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

from vigil.clock import SystemClock
from vigil.config import LimitsSettings
from vigil.errors import FloodLimited
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore


def add_follow_ups(
    path: str, parent_id: int, tries: int, limits: LimitsSettings, barrier: Barrier, results: Queue[tuple[int, int]]
) -> None:
    """Once every process is ready, try to add ``tries`` follow-ups of ``parent_id``
    from one source; report (created, refused)."""

    async def run() -> tuple[int, int]:
        store = await SqliteStore.open(Path(path), clock=SystemClock(), busy_timeout_ms=30_000, limits=limits)
        created = refused = 0
        try:
            barrier.wait()
            for i in range(tries):
                try:
                    await store.add_task(NewTask(f"follow-up {i}", parent_id=parent_id, source="sensor:race"))
                    created += 1
                except FloodLimited:
                    refused += 1
        finally:
            await store.close()
        return created, refused

    results.put(asyncio.run(run()))
