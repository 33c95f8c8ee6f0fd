"""Store operations against plain ``sqlite3`` and the peers, all durable.

1. One task added through ``SqliteStore.add_task`` vs one plain INSERT + COMMIT into
   the same table; huey enqueue, persist-queue put and litequeue put alongside.
2. A sensor batch of 1,000 keyed tasks, 90 % already present, through
   ``add_tasks`` vs one plain ``executemany`` of ``INSERT … ON CONFLICT DO NOTHING``.
3. ``claim_next`` with 1,000,000 finished tasks and 10,000 urgent not-yet-due ones
   in the table vs the same claim on a small table (and the claim's query plan).

Both sides run at ``synchronous=FULL`` in WAL mode unless a row says otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import peers
from bench.harness import (
    Contender,
    Result,
    command_line,
    fmt_ratio,
    heading,
    interleave,
    machine,
    median,
    record,
    speed_ratio,
    synchronous_of,
    table,
    timed_calls,
    workload_args,
)
from vigil.models import NewTask
from vigil.store.sql.runs import CLAIM
from vigil.store.sqlite import SqliteStore

DAY_MS = 86_400_000


@dataclass(frozen=True)
class Sizes:
    rounds: int
    single_ops: int  # single adds per contender per round
    batch_rows: int  # rows per sensor batch
    batches: int  # batches per contender per round
    finished: int  # finished tasks in the big claim table
    not_due: int  # urgent, not-yet-due tasks in the big claim table
    claims: int  # claims per contender per round


FULL = Sizes(rounds=60, single_ops=25, batch_rows=1000, batches=3, finished=1_000_000, not_due=10_000, claims=100)
QUICK = Sizes(rounds=2, single_ops=10, batch_rows=100, batches=1, finished=5_000, not_due=500, claims=10)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def vigil_contender(
    name: str, runner: asyncio.Runner, store: SqliteStore, op: Callable[[int], Awaitable[Any]]
) -> Contender:
    """``op(i)`` awaited ``n`` times in one coroutine; latencies are taken around
    each await, i.e. what an async caller of the store sees."""

    async def batch(n: int) -> list[float]:
        latencies = []
        for i in range(n):
            start = time.perf_counter()
            await op(i)
            latencies.append(time.perf_counter() - start)
        return latencies

    durability = runner.run(store._db.read(synchronous_of))
    return Contender(name, durability, lambda n: runner.run(batch(n)))


# --- 1. one task ------------------------------------------------------------------


def single_add(runner: asyncio.Runner, folder: Path, sizes: Sizes) -> tuple[str, list[str]]:
    store = runner.run(SqliteStore.open(folder / "single" / "vigil.db"))
    vigil = vigil_contender(
        "Vigil SqliteStore.add_task", runner, store, lambda i: store.add_task(NewTask(subject=f"task {i}"))
    )
    contenders = [
        vigil,
        peers.plain_single_insert(
            "plain sqlite3, same table", peers.plain_connect(folder / "plain.db", create=True), now_ms()
        ),
    ]

    # The same raw INSERT into Vigil's full schema: separates the schema's own work
    # (audit-row and count triggers) from the store's Python and thread-hop cost.
    runner.run(_migrate(folder / "schema.db"))
    contenders.append(
        peers.plain_single_insert(
            "plain sqlite3, Vigil schema (triggers)", peers.plain_connect(folder / "schema.db", create=False), now_ms()
        )
    )
    # What one await on the store costs before any SQL: the hop to the connection's
    # thread and back, the floor under every store call.
    hop = vigil_contender("Vigil store, one hop and no SQL", runner, store, lambda i: store._db.read(_nothing))
    contenders.append(Contender(hop.name, "— (no write)", hop.run))
    # The plain INSERT run through the store's transaction helper (lock, hop,
    # BEGIN IMMEDIATE … COMMIT) on a second store: what the async design costs a
    # durable write, apart from the store's own validation and statement.
    hopped = runner.run(SqliteStore.open(folder / "hopped" / "vigil.db"))
    stamp = now_ms()

    def plain_body(i: int) -> Callable[[sqlite3.Connection], object]:
        return lambda conn: conn.execute(peers.INSERT_TASK, peers.task_row(f"hopped task {i}", stamp))

    contenders.append(
        vigil_contender(
            "plain INSERT through the store's hop (Vigil schema)",
            runner,
            hopped,
            lambda i: hopped._db.write(plain_body(i)),
        )
    )
    closers: list[Callable[[], object]] = []
    for opener in (peers.huey_enqueue, peers.persist_queue_put, peers.litequeue_put):
        contender, handle = opener(folder)
        contenders.append(contender)
        closers.append(getattr(handle, "close", lambda: None))
    try:
        results = interleave(contenders, rounds=sizes.rounds, ops=sizes.single_ops)
    finally:
        runner.run(store.close())
        runner.run(hopped.close())
        for close in closers:
            close()
    targets = {"plain sqlite3, same table": 0.7}
    verdict = _verdict(results, "plain sqlite3, same table", 0.7)
    by_name = {r.name: r for r in results}
    vigil_r, plain, schema = results[0], by_name["plain sqlite3, same table"], by_name[contenders[2].name]
    # Absolute costs hold better than the ratio, which moves with the fsync's price.
    extra = _paired_difference(vigil_r, plain)
    hopped_r = by_name[contenders[4].name]
    breakdown = (
        f"Where Vigil's extra time per add goes (medians of per-round differences): "
        f"{extra * 1e6:.0f} µs over the plain insert, of which the schema's audit trigger "
        f"{_paired_difference(schema, plain) * 1e6:.0f} µs, the hop to the store's thread around a durable "
        f"transaction {_paired_difference(hopped_r, schema) * 1e6:.0f} µs (an idle hop alone: "
        f"{by_name[hop.name].median_s * 1e6:.0f} µs), and the store's own validation and statement "
        f"{_paired_difference(vigil_r, hopped_r) * 1e6:.0f} µs. The plain insert's durable commit took "
        f"{plain.median_s * 1e6:.0f} µs in this run."
    )
    text = table(results, results[0], unit="task", targets=targets) + "\n\n" + breakdown
    return text, [f"one task added: Vigil vs plain {verdict}"]


def _paired_difference(a: Result, b: Result) -> float:
    """Median over rounds of a's round mean minus b's, in seconds."""
    return median([x - y for x, y in zip(a.round_means_s, b.round_means_s, strict=True)])


def _nothing(conn: sqlite3.Connection) -> None:
    """A store body that runs no SQL."""


async def _migrate(path: Path) -> None:
    await (await SqliteStore.open(path)).close()


# --- 2. sensor batch ----------------------------------------------------------------


def sensor_batch(runner: asyncio.Runner, folder: Path, sizes: Sizes) -> tuple[str, list[str]]:
    present = sizes.batch_rows * 9 // 10
    fresh = sizes.batch_rows - present
    source = "sensor:bench"
    store = runner.run(SqliteStore.open(folder / "batch" / "vigil.db"))
    old = [NewTask(subject=f"seen {j}", source=source, source_key=f"k{j}") for j in range(present)]
    runner.run(store.add_tasks(old, actor=source))
    vigil_rounds = itertools.count()

    def vigil_batch(_i: int) -> Awaitable[Any]:
        r = next(vigil_rounds)
        news = old + [NewTask(subject=f"new {r}.{j}", source=source, source_key=f"n{r}.{j}") for j in range(fresh)]
        return store.add_tasks(news, actor=source)

    conn = peers.plain_connect(folder / "batch-plain.db", create=True)
    stamp = now_ms()
    old_rows = [peers.task_row(f"seen {j}", stamp, f"k{j}", source) for j in range(present)]
    conn.execute("BEGIN")
    conn.executemany(peers.INSERT_TASK, old_rows)
    conn.execute("COMMIT")
    plain_rounds = itertools.count()

    def plain_batch(_i: int) -> None:
        r = next(plain_rounds)
        rows = old_rows + [peers.task_row(f"new {r}.{j}", stamp, f"n{r}.{j}", source) for j in range(fresh)]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(peers.INSERT_TASK_IGNORE, rows)
        conn.execute("COMMIT")

    contenders = [
        vigil_contender("Vigil SqliteStore.add_tasks", runner, store, vigil_batch),
        Contender("plain sqlite3 executemany, same table", synchronous_of(conn), lambda n: timed_calls(plain_batch, n)),
    ]
    try:
        results = interleave(contenders, rounds=sizes.rounds, ops=sizes.batches)
    finally:
        runner.run(store.close())
        conn.close()
    per_row = ", ".join(f"{r.name}: {r.median_s / sizes.batch_rows * 1e6:.1f} µs/row" for r in results)
    verdict = _verdict(results, "plain sqlite3 executemany, same table", 0.5)
    text = f"Batches of {sizes.batch_rows:,} keyed tasks, {fresh} new ({per_row}).\n\n" + table(
        results, results[0], unit="batch", targets={"plain sqlite3 executemany, same table": 0.5}
    )
    return text, [f"sensor batch, 10 % new: Vigil vs plain {verdict}"]


# --- 3. claim on a huge table ----------------------------------------------------------


def build_history(path: Path, *, finished: int, not_due: int, stamp: int) -> None:
    """``finished`` completed tasks and ``not_due`` priority-1 tasks due in a day,
    through the real schema (triggers write their events and counts); written at
    ``synchronous=OFF`` because the build itself is not measured."""
    asyncio.run(_migrate(path))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    conn.executemany(
        """INSERT INTO tasks (subject, status, priority, scheduled_for, created_at, updated_at, updated_by,
                              completed_at, attempt_count)
           VALUES ('done ' || ?1, 'completed', 1 + ?1 % 9, ?2, ?2, ?2, 'dispatcher', ?2, 1)""",
        ((i, stamp - DAY_MS) for i in range(finished)),
    )
    conn.executemany(
        """INSERT INTO tasks (subject, priority, scheduled_for, created_at, updated_at, updated_by)
           VALUES ('later ' || ?1, 1, ?2, ?3, ?3, 'human')""",
        ((i, stamp + DAY_MS, stamp) for i in range(not_due)),
    )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()


def claim_contender(name: str, runner: asyncio.Runner, store: SqliteStore) -> Contender:
    """Refills ``n`` due priority-5 tasks (untimed), then times ``n`` claims."""

    async def claims(n: int) -> list[float]:
        await store.add_tasks([NewTask(subject=f"due {i}") for i in range(n)], actor="human")
        latencies = []
        for _ in range(n):
            start = time.perf_counter()
            claim = await store.claim_next(worker="bench", lease_ms=60_000)
            latencies.append(time.perf_counter() - start)
            assert claim is not None, "a refilled task was not claimable"
        return latencies

    durability = runner.run(store._db.read(synchronous_of))
    return Contender(name, durability, lambda n: runner.run(claims(n)))


def claim_big(runner: asyncio.Runner, folder: Path, sizes: Sizes) -> tuple[str, list[str]]:
    big_path = folder / "claim-big.db"
    start = time.monotonic()
    build_history(big_path, finished=sizes.finished, not_due=sizes.not_due, stamp=now_ms())
    took = time.monotonic() - start
    print(f"built {sizes.finished:,} finished + {sizes.not_due:,} not-yet-due tasks in {took:.0f} s")
    big = runner.run(SqliteStore.open(big_path))
    small = runner.run(SqliteStore.open(folder / "claim-small.db"))
    claim_params = {
        "now": now_ms(),
        "worker": "x",
        "lease_until": 0,
        "executor": None,
        "max_priority": 9,
        "anyone": True,
    }
    with contextlib.closing(sqlite3.connect(big_path)) as conn:  # a plan, read beside the store
        plan = [str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + str(CLAIM.sqlite), claim_params)]
    scans = [line for line in plan if line.startswith("SCAN tasks")]
    contenders = [
        claim_contender(f"Vigil claim_next, {sizes.finished:,} finished + {sizes.not_due:,} not due", runner, big),
        claim_contender("Vigil claim_next, small table", runner, small),
    ]
    try:
        results = interleave(contenders, rounds=sizes.rounds, ops=sizes.claims)
    finally:
        runner.run(big.close())
        runner.run(small.close())
    verdict = _verdict(results, "Vigil claim_next, small table", 0.9)
    plan_text = "\n".join(plan)
    text = (
        table(results, results[0], unit="claim", targets={"Vigil claim_next, small table": 0.9})
        + f"\n\nQuery plan of the claim on the big table ({'SCANS tasks' if scans else 'no full scan of tasks'}):\n\n"
        + f"```\n{plan_text}\n```"
    )
    return text, [f"claim on a huge table vs a small one {verdict}"]


def _verdict(results: list[Result], other: str, target: float) -> str:
    vigil = results[0]
    ratio = speed_ratio(vigil, next(r for r in results if r.name == other))
    return fmt_ratio(ratio, f"≥ {target}×", ratio >= target)


def main(argv: list[str] | None = None) -> int:
    args = workload_args(__doc__.splitlines()[0], argv)
    missing = peers.missing_peers()
    if missing:
        names = ", ".join(missing)
        print(f"bench.store_ops: peers not installed ({names}); run: pip install -e '.[bench]'", file=sys.stderr)
        return 3
    sizes = QUICK if args.quick else FULL
    where = machine()
    print(f"machine: {where}")
    sections: list[str] = []
    verdicts: list[str] = []
    with tempfile.TemporaryDirectory(prefix="vigil-bench-") as tmp, asyncio.Runner() as runner:
        folder = Path(tmp)
        for title, workload in (
            ("One task added (one durable commit each)", single_add),
            ("Sensor batch insert, 10 % new keys (one transaction per batch)", sensor_batch),
            ("Claim with a long history in the table", claim_big),
        ):
            heading(title)
            text, found = workload(runner, folder, sizes)
            print(text, flush=True)
            sections.append(f"#### {title}\n\n{text}")
            verdicts.extend(found)
    heading("verdicts")
    print("\n".join(verdicts))
    if args.record and not args.quick:
        body = f"Command: `{command_line()}`. Machine: {where}.\n\n" + "\n\n".join(sections)
        done = record("store_ops", body)
        print("recorded in docs/performance.md" if done else "docs/performance.md has no store_ops markers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
