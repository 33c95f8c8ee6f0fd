"""Code that runs in other OS processes during the PostgreSQL multi-process tests.

Each function is a ``multiprocessing`` target (forked from the fork server of
``tests.processes``, which imports this module once); each opens its own store,
with its own connections, as a separate host would.
"""

from __future__ import annotations

import asyncio
import random
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

from vigil.clock import SystemClock
from vigil.models import DedupScope, NewTask


def add_keys(
    url: str, keys: list[str], scope: str, seed: int, barrier: Barrier, results: Queue[tuple[int, list[str]]]
) -> None:
    """Add one task per key (dedup ``scope``), in a shuffled order, once every process
    is ready; report the keys this process created."""
    from vigil.store.postgres import PostgresStore

    async def run() -> list[str]:
        store = await PostgresStore.open(url, clock=SystemClock())
        try:
            order = list(keys)
            random.Random(seed).shuffle(order)
            barrier.wait()
            created = []
            for key in order:
                task = NewTask(f"task for {key}", source_key=key, dedup=DedupScope(scope))
                result = await store.add_task(task, actor=f"p{seed}")
                if result.created:
                    created.append(key)
            return created
        finally:
            await store.close()

    results.put((seed, asyncio.run(run())))
