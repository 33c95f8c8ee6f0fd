"""The dispatcher: wake-up latency while idle, and dispatch throughput.

1. Wake-up latency: a real ``vigil run`` (dry-run executor) idles on a fresh home;
   another process adds one task at a time. Measured from the add's commit to the
   executor's start (the dry-run executor writes the run's transcript as it starts:
   its mtime), and, separately, from launching the real ``vigil task add`` command
   (its own start-up included) to the executor's start. Median and p99 over the
   adds; each add waits a random 0.2–0.6 s after the previous task finished, so
   adds land at every phase of the idle loop's probe.
2. Throughput: ``Dispatcher.run_forever`` with a no-op executor (claim, prompt,
   run, finish per task) vs huey's consumer loop (``Worker.loop()``: dequeue,
   execute, store the result; ``SqliteHuey`` set to ``synchronous=FULL``) and a raw
   ``sqlite3`` loop doing one claim and one finish per task (two commits) on
   Vigil's schema, all at ``synchronous=FULL``, WAL, interleaved A B A B. Two
   Vigil rows: as ``vigil run`` builds it (with the guard: gate, budget,
   approvals) and without a guard; and, to show what bounds them, Vigil's store
   alone: ``record`` then ``claim_next`` in a loop (the two transactions the
   dispatcher commits per task, without the dispatcher). A guard, not a race: the guarded
   row's time per task may exceed the raw loop's by at most 1 ms (an agent run
   takes minutes); its ratios to huey and to the raw loop are reported.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.harness import (
    Contender,
    command_line,
    fmt_s,
    heading,
    interleave,
    machine,
    percentile,
    record,
    speed_ratio,
    synchronous_of,
    table,
    workload_args,
)
from bench.peers import huey_consumer
from dispatch.alerts import AlertHook
from dispatch.executors.fake import FakeExecutor
from dispatch.guard import ClaimDecision, Guard, Guardrails
from dispatch.loop import Dispatcher
from vigil.clock import SystemClock
from vigil.config import Settings, load_settings
from vigil.home import init_home
from vigil.models import NewTask, Outcome, OutcomeKind
from vigil.store.sqlite import SqliteStore


@dataclass(frozen=True)
class Sizes:
    adds: int  # wake-up latency samples (store adds)
    cli_adds: int  # wake-up samples through the real `vigil task add`
    rounds: int  # throughput rounds per contender
    tasks: int  # tasks per throughput round


FULL = Sizes(adds=50, cli_adds=10, rounds=12, tasks=300)
QUICK = Sizes(adds=5, cli_adds=2, rounds=2, tasks=20)
SAFETY_S = 30.0

# --- 1. wake-up latency -----------------------------------------------------------


def _wait(what: str, check: Callable[[], object], timeout_s: float = SAFETY_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.005)


def _status(conn: sqlite3.Connection, task_id: int) -> str:
    row = conn.execute("SELECT status FROM tasks WHERE id = ?", (task_id,)).fetchone()
    return str(row[0]) if row else "missing"


def _executor_started_ms(home: Path, task_id: int) -> float:
    """When the dry-run executor wrote the task's first transcript (wall clock, ms)."""
    return (home / "logs" / "runs" / f"{task_id}-1.jsonl").stat().st_mtime_ns / 1e6


def wake_up(folder: Path, sizes: Sizes) -> tuple[str, list[str]]:
    home = folder / "wake"
    init_home(home)
    settings = load_settings(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    log = (folder / "wake-run.log").open("wb")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "vigil", "--home", str(home), "run"], stdout=log, stderr=subprocess.STDOUT, env=env
    )
    reader = sqlite3.connect(settings.store.path, timeout=10)
    rng = random.Random(1)
    from_commit_ms: list[float] = []
    from_cli_ms: list[float] = []
    try:
        _wait("the database", settings.store.path.exists)

        def idle() -> bool:
            try:
                row = reader.execute("SELECT value FROM loop_state WHERE key = 'dispatcher'").fetchone()
            except sqlite3.OperationalError:
                return False
            return row is not None and json.loads(row[0]).get("state") == "idle"

        _wait("vigil run to be idle", idle)
        adder = asyncio.run(_add_one_by_one(settings, reader, rng, sizes.adds))
        from_commit_ms.extend(adder)
        for n in range(sizes.cli_adds):
            time.sleep(rng.uniform(0.2, 0.6))
            launched_ms = time.time_ns() / 1e6
            out = subprocess.run(
                [sys.executable, "-m", "vigil", "--home", str(home), "task", "add", f"cli {n}", "--json"],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            task_id = int(json.loads(out.stdout)["id"])

            def completed(tid: int = task_id) -> bool:
                return _status(reader, tid) == "completed"

            _wait("the task to complete", completed)
            from_cli_ms.append(_executor_started_ms(home, task_id) - launched_ms)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=SAFETY_S)
        log.close()
        reader.close()
    lines = [
        "| from | adds | median | p99 |",
        "|---|---|---|---|",
        _latency_row("the add's commit (another process) to the executor's start", from_commit_ms),
        _latency_row("launching `vigil task add` (CLI start-up included) to the executor's start", from_cli_ms),
    ]
    median_ms = sorted(from_commit_ms)[len(from_commit_ms) // 2]
    return "\n".join(lines), [f"wake-up latency from commit: median {fmt_s(median_ms / 1000)}"]


def _latency_row(label: str, values_ms: list[float]) -> str:
    ordered = sorted(values_ms)
    median = ordered[len(ordered) // 2] if ordered else float("nan")
    return f"| {label} | {len(values_ms)} | {fmt_s(median / 1000)} | {fmt_s(percentile(values_ms, 99) / 1000)} |"


async def _add_one_by_one(
    settings: Settings, reader: sqlite3.Connection, rng: random.Random, count: int
) -> list[float]:
    """Add ``count`` tasks, each once the previous one finished; returns each one's
    commit → executor start latency in ms."""
    store = await SqliteStore.open(settings.store.path)
    latencies = []
    try:
        for n in range(count):
            await asyncio.sleep(rng.uniform(0.2, 0.6))
            result = await store.add_task(NewTask(f"wake {n}"))
            committed_ms = time.time_ns() / 1e6
            task_id = result.task_id or 0
            deadline = time.monotonic() + SAFETY_S
            while _status(reader, task_id) != "completed":
                if time.monotonic() > deadline:
                    raise RuntimeError(f"task {task_id} was never run")
                await asyncio.sleep(0.005)
            latencies.append(_executor_started_ms(settings.home, task_id) - committed_ms)
    finally:
        await store.close()
    return latencies


# --- 2. throughput ------------------------------------------------------------------

RAW_CLAIM = """
UPDATE tasks SET status = 'active', started_at = ?1, updated_at = ?1, updated_by = 'raw',
       attempt_count = attempt_count + 1
WHERE id = (SELECT id FROM tasks WHERE status = 'pending' AND waiting_on = 0 AND scheduled_for <= ?1
            ORDER BY priority, scheduled_for, id LIMIT 1)
RETURNING id
"""
RAW_FINISH = """
UPDATE tasks SET status = 'completed', completed_at = ?1, updated_at = ?1, updated_by = 'raw',
       result_summary = 'done' WHERE id = ?2
"""


def raw_contender(path: Path) -> tuple[Contender, sqlite3.Connection]:
    """One claim and one finish per task, each its own durable transaction."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    now = SystemClock().now_ms()

    def run(n: int) -> list[float]:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO tasks (subject, scheduled_for, created_at, updated_at, updated_by) VALUES (?, ?, ?, ?, 'raw')",
            [(f"raw {i}", now, now, now) for i in range(n)],
        )
        conn.execute("COMMIT")
        latencies = []
        for _ in range(n):
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            task_id = conn.execute(RAW_CLAIM, (SystemClock().now_ms(),)).fetchone()[0]
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(RAW_FINISH, (SystemClock().now_ms(), task_id))
            conn.execute("COMMIT")
            latencies.append(time.perf_counter() - start)
        return latencies

    return Contender("raw sqlite3: claim + finish, 2 commits", synchronous_of(conn), run), conn


def raw_hop_contender(runner: asyncio.Runner, store: SqliteStore) -> Contender:
    """The raw loop's claim and finish in one durable transaction, through the
    store's hop (``Database.write``): what a store call costs at the least (one
    thread hop around one durable commit) before any of Vigil's own statements."""
    clock = SystemClock()

    def claim_and_finish(conn: sqlite3.Connection, previous: int | None) -> int | None:
        now = clock.now_ms()
        if previous is not None:
            conn.execute(RAW_FINISH, (now, previous))
        row = conn.execute(RAW_CLAIM, (now,)).fetchone()
        return None if row is None else int(row[0])

    async def chain(n: int) -> list[float]:
        await store.add_tasks([NewTask(f"task {i}") for i in range(n)], actor="bench")
        task_id = await store._db.write(functools.partial(claim_and_finish, previous=None))
        latencies = []
        while task_id is not None:
            start = time.perf_counter()
            task_id = await store._db.write(functools.partial(claim_and_finish, previous=task_id))
            latencies.append(time.perf_counter() - start)
        return latencies

    durability = runner.run(store._db.read(synchronous_of))
    name = "raw claim + finish SQL, 1 commit, through the store's hop"
    return Contender(name, durability, lambda n: runner.run(chain(n)))


class _Unguarded:
    """The loop alone: a guard that lets everything through and reads nothing."""

    async def may_claim(self, now_ms: int) -> ClaimDecision:
        return ClaimDecision(True)

    async def after_outcome(self, task: object, outcome: object) -> None:
        return None

    async def deferred(self, task: object, skills: object) -> None:
        return None

    def needs_approval(self, task: object, skills: object) -> bool:
        return False


def dispatcher_contender(
    name: str, runner: asyncio.Runner, store: SqliteStore, settings: Settings, *, guarded: bool
) -> tuple[Contender, AlertHook]:
    """``run_forever`` over ``n`` fresh tasks with a no-op executor; each task's time
    is from one executor start to the next (the last: to the loop's return)."""
    clock = SystemClock()
    alerts = AlertHook(settings.alerts, settings.home)
    guard: Guardrails = Guard(store, settings, clock, alerts) if guarded else _Unguarded()

    async def cycle(n: int) -> list[float]:
        await store.add_tasks([NewTask(f"task {i}") for i in range(n)], actor="bench")
        stamps: list[float] = []
        stop = asyncio.Event()

        def noop(task: object, ctx: object) -> Outcome:
            stamps.append(time.perf_counter())
            if len(stamps) == n:
                stop.set()  # the loop records this last task, then returns
            return Outcome(OutcomeKind.SUCCESS, summary="no-op")

        fake = FakeExecutor(noop)
        dispatcher = Dispatcher(store, settings, lambda _name: fake, clock, "bench:1:x", guard=guard)
        start = time.perf_counter()
        await dispatcher.run_forever(stop)
        end = time.perf_counter()
        marks = [start, *stamps[1:], end]
        return [b - a for a, b in itertools.pairwise(marks)]

    durability = runner.run(store._db.read(synchronous_of))
    return Contender(name, durability, lambda n: runner.run(cycle(n))), alerts


def store_contender(runner: asyncio.Runner, store: SqliteStore, lease_ms: int) -> Contender:
    """The store's share of a dispatch cycle: ``record`` then ``claim_next``, back to
    back over ``n`` fresh tasks (two hops and two durable commits each), nothing else."""
    done = Outcome(OutcomeKind.SUCCESS, summary="no-op")

    async def chain(n: int) -> list[float]:
        await store.add_tasks([NewTask(f"task {i}") for i in range(n)], actor="bench")
        claim = await store.claim_next(worker="bench", lease_ms=lease_ms)
        latencies = []
        while claim is not None:
            start = time.perf_counter()
            await store.record(claim, done, worker="bench")
            claim = await store.claim_next(worker="bench", lease_ms=lease_ms)
            latencies.append(time.perf_counter() - start)
        return latencies

    durability = runner.run(store._db.read(synchronous_of))
    return Contender("Vigil store alone: record + claim_next per task", durability, lambda n: runner.run(chain(n)))


def throughput(folder: Path, sizes: Sizes) -> tuple[str, list[str]]:
    home = folder / "through"
    init_home(home)
    settings = load_settings(home)
    with asyncio.Runner() as runner:
        store = runner.run(SqliteStore.open(settings.store.path))
        bare_home = folder / "bare"
        init_home(bare_home)
        bare_settings = load_settings(bare_home)
        bare_store = runner.run(SqliteStore.open(bare_settings.store.path))
        raw_path = folder / "raw.db"
        schema = runner.run(SqliteStore.open(raw_path))  # Vigil's schema (triggers, indexes) for the raw loop
        runner.run(schema.close())
        guarded, hook = dispatcher_contender(
            "Vigil dispatcher, as `vigil run` builds it (guard on)", runner, store, settings, guarded=True
        )
        bare, bare_hook = dispatcher_contender(
            "Vigil dispatcher, no guard", runner, bare_store, bare_settings, guarded=False
        )
        raw, conn = raw_contender(raw_path)
        huey, huey_app = huey_consumer(folder)
        floor_store = runner.run(SqliteStore.open(folder / "floor.db"))
        floor = store_contender(runner, floor_store, settings.dispatch.lease_ms)
        hop_store = runner.run(SqliteStore.open(folder / "hop.db"))
        hop = raw_hop_contender(runner, hop_store)
        try:
            results = interleave([guarded, bare, floor, huey, raw, hop], rounds=sizes.rounds, ops=sizes.tasks)
        finally:
            runner.run(hop_store.close())
            runner.run(hook.drain())
            runner.run(bare_hook.drain())
            runner.run(store.close())
            runner.run(bare_store.close())
            runner.run(floor_store.close())
            huey_app.storage.close()
            conn.close()
    overhead_s = results[0].median_s - results[4].median_s
    guard = "met" if overhead_s <= OVERHEAD_BOUND_S else "MISSED"
    verdicts = [
        f"{results[0].name}: {fmt_s(overhead_s)} per task over the raw loop"
        f" (guard ≤ {fmt_s(OVERHEAD_BOUND_S)}: {guard})",
        f"{results[0].name} vs {results[3].name}: {speed_ratio(results[0], results[3]):.2f}×",
        f"{results[0].name} vs {results[4].name}: {speed_ratio(results[0], results[4]):.2f}×",
    ]
    verdicts.append(f"{results[1].name} vs raw: {speed_ratio(results[1], results[4]):.2f}×")
    verdicts.append(f"{results[0].name} vs the store alone: {speed_ratio(results[0], results[2]):.2f}×")
    verdicts.append(f"{results[5].name} vs raw: {speed_ratio(results[5], results[4]):.2f}×")
    return table(results, results[0], unit="task"), verdicts


# The guarded dispatcher's time per task over the raw two-commit loop's, at most:
# well under what anyone notices next to an agent run of minutes.
OVERHEAD_BOUND_S = 0.001


def main(argv: list[str] | None = None) -> int:
    args = workload_args(__doc__.splitlines()[0], argv)
    sizes = QUICK if args.quick else FULL
    print(f"machine: {machine()}")
    sections: list[str] = []
    verdicts: list[str] = []
    with tempfile.TemporaryDirectory(prefix="vigil-bench-") as tmp:
        for title, workload in (
            ("Wake-up latency while idle (vigil run, dry-run executor)", wake_up),
            ("Dispatch throughput, no-op executor", throughput),
        ):
            heading(title)
            text, found = workload(Path(tmp), sizes)
            print(text, flush=True)
            sections.append(f"#### {title}\n\n{text}")
            verdicts.extend(found)
    heading("verdicts")
    print("\n".join(verdicts))
    if args.record and not args.quick:
        body = f"Command: `{command_line()}`. Machine: {machine()}.\n\n" + "\n\n".join(sections)
        recorded = record("dispatch_cycle", body)
        print("recorded in docs/performance.md" if recorded else "docs/performance.md has no dispatch_cycle markers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
