"""What a prune costs: ``Store.prune`` over a history of finished tasks.

    python -m bench.prune --tasks 50000

Fills a fresh SQLite store (``synchronous=FULL``, WAL) with finished tasks, one run
each, a second apart; then prunes the older half in batches of 200 and reports the
time per batch (each one write transaction: how long other writers may wait), a
second prune with the same cutoff (the walk stops at the first task created after
it), a dry run over the whole history, and the spend before and after (equal).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from vigil.clock import ManualClock
from vigil.store.sqlite import SqliteStore

BATCH = 200


def _fill(conn: sqlite3.Connection, tasks: int, start_ms: int) -> None:
    conn.executemany(
        """INSERT INTO tasks (subject, status, source, skills, scheduled_for, created_at, updated_at,
                              updated_by, completed_at)
           VALUES (?, 'completed', 'sensor:feeds', '["triage"]', ?2, ?2, ?2 + 500, 'bench', ?2 + 500)""",
        [(f"task {n}", start_ms + n * 1000) for n in range(tasks)],
    )
    conn.executemany(
        """INSERT INTO runs (task_id, attempt, started_at, finished_at, outcome, cost_usd, tokens_in, model,
                             transcript_path)
           VALUES (?1, 1, ?2, ?2 + 400, 'success', 0.01, 100, 'sonnet', 'logs/runs/' || ?1 || '-1.jsonl')""",
        [(n + 1, start_ms + n * 1000) for n in range(tasks)],
    )


async def measure(tasks: int) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        clock = ManualClock()
        start_ms = clock.now_ms()
        store = await SqliteStore.open(Path(folder) / "vigil.db", clock=clock)
        try:
            await store._db.write(lambda conn: _fill(conn, tasks, start_ms))
            cutoff = start_ms + tasks * 500  # the older half
            spend = await store.spend_since(0)
            began = time.perf_counter()
            pruned = await store.prune(finished_before_ms=cutoff, batch_size=BATCH)
            took = time.perf_counter() - began
            began = time.perf_counter()
            again = await store.prune(finished_before_ms=cutoff, batch_size=BATCH)
            again_took = time.perf_counter() - began
            began = time.perf_counter()
            preview = await store.prune(finished_before_ms=start_ms + tasks * 1000, dry_run=True)
            preview_took = time.perf_counter() - began
            after = await store.spend_since(0)
        finally:
            await store.close()
    return [
        f"history: {tasks} finished tasks, one run each (synchronous=FULL, WAL)",
        f"prune the older half: {pruned.tasks} tasks in {pruned.batches} batches of {BATCH}, "
        f"{took:.2f} s, {took / pruned.batches * 1000:.1f} ms per batch",
        f"second prune, same cutoff: {again.tasks} tasks, {again_took * 1000:.1f} ms",
        f"dry run over the rest: {preview.tasks} tasks, {preview_took * 1000:.0f} ms",
        f"spend before ${spend:.2f}, after ${after:.2f}",
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.prune", description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50_000)
    args = parser.parse_args(argv)
    for line in asyncio.run(measure(args.tasks)):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
