"""One process of the concurrency load: a random mix of store operations for a while.

Usage: ``python -m tests.reliability.load_worker DB SEED SECONDS``. Prints one JSON
line: operations done, conditional writes refused (the task had moved on: an
expected answer, not an error), and every other exception as ``"Type: message"``.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from pathlib import Path

from vigil.errors import InvalidTransition, TaskNotFound
from vigil.models import DedupScope, NewTask
from vigil.store.sqlite import SqliteStore

SHARED_KEYS = 20  # every worker adds under these keys: dedup is contended


async def work(db: Path, seed: int, seconds: float) -> dict[str, object]:
    rng = random.Random(seed)
    store = await SqliteStore.open(db)
    ops = refused = added = 0
    errors: list[str] = []
    known: list[int] = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            roll = rng.random()
            try:
                if roll < 0.35:
                    key = f"shared-{rng.randrange(SHARED_KEYS)}"
                    result = await store.add_task(NewTask(f"shared {key}", source_key=key, dedup=DedupScope.OPEN))
                    added += result.created
                elif roll < 0.5:
                    result = await store.add_task(NewTask("unique", source_key=f"u-{seed}-{ops}"))
                    added += 1
                    if result.task_id is not None:
                        known.append(result.task_id)
                elif roll < 0.65 and known:
                    await store.set_priority(rng.choice(known), rng.randint(1, 9), actor="human")
                elif roll < 0.75 and known:
                    await store.cancel(rng.choice(known), actor="human")
                else:
                    queue = await store.queue(limit=50)
                    known.extend(t.id for t in queue[:5])
                    del known[:-200]
                    await store.count_by_status()
            except (InvalidTransition, TaskNotFound):
                refused += 1
            except Exception as err:  # every other error is what the test looks for
                errors.append(f"{type(err).__name__}: {err}")
            ops += 1
    finally:
        await store.close()
    return {"ops": ops, "refused": refused, "added": added, "errors": errors}


def main() -> None:
    db, seed, seconds = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    print(json.dumps(asyncio.run(work(db, seed, seconds))))


if __name__ == "__main__":
    main()
