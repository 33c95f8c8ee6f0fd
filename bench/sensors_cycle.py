"""Sensors: one full cycle of 200 sensors that each return 10 tasks, 90 % duplicates.

Every sensor returns 10 tasks per cycle: 9 keys that are already open in the queue
(dropped by the database) and 1 new key. A cycle is ``SensorRunner.run_now()`` —
the same code path as a scheduled run: timeout, cap, one transaction per sensor
(tasks + state), state read, back-off computation. Reported per cycle: wall time,
CPU time of the process (the SQLite thread included) and the per-sensor overhead.

Contenders, interleaved A B A B over several rounds on separate files at the same
durability (``synchronous=FULL``, WAL):

* Vigil, 200 × 10 tasks (90 % duplicates);
* Vigil, 200 sensors returning nothing (the runner's own cost per sensor);
* raw sqlite3: the same inserts and a ``sensor_state`` upsert, one transaction per
  sensor (the floor: what the database work costs without any runner).
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import command_line, fmt_s, heading, machine, median, record, synchronous_of, workload_args
from sensors.api import FoundTask, SensorContext, SensorFunc
from sensors.runner import SensorRunner
from sensors.spec import SensorSpec
from sensors.timing import Schedule
from vigil.clock import SystemClock
from vigil.config import LimitsSettings, SensorDefaults, Settings, StoreSettings
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore

TASKS_PER_SENSOR = 10
DUPLICATES = 9  # of the 10


@dataclass(frozen=True)
class Sizes:
    sensors: int
    rounds: int


FULL = Sizes(sensors=200, rounds=7)
QUICK = Sizes(sensors=20, rounds=2)


@dataclass
class Cycle:
    wall_s: list[float]
    cpu_s: list[float]

    def row(self, name: str, sensors: int, durability: str) -> str:
        wall, cpu = median(self.wall_s), median(self.cpu_s)
        return (
            f"| {name} | {durability} | {fmt_s(wall)} | {fmt_s(cpu)} | {fmt_s(wall / sensors)} | "
            f"{fmt_s(cpu / sensors)} |"
        )


def cpu_now() -> float:
    return time.process_time()  # every thread of the process: the SQLite thread too


def make_sensor(index: int, cycle: list[int], empty: bool) -> SensorFunc:
    async def found(ctx: SensorContext) -> list[FoundTask]:
        if empty:
            return []
        tasks = [FoundTask(key=f"old-{k}", subject=f"sensor {index} known {k}") for k in range(DUPLICATES)]
        tasks.append(FoundTask(key=f"new-{cycle[0]}", subject=f"sensor {index} new in cycle {cycle[0]}"))
        return tasks

    return found


async def vigil_setup(path: Path, sizes: Sizes, empty: bool) -> tuple[SqliteStore, SensorRunner, list[int]]:
    settings = Settings(
        home=path.parent,
        config_path=None,
        store=StoreSettings(path=path),
        sensor_defaults=SensorDefaults(jitter_ms=0),
        limits=LimitsSettings(max_per_source_per_day=0),  # the benchmark adds thousands per source
    )
    store = await SqliteStore.open(path, clock=SystemClock(), limits=settings.limits)
    cycle = [0]
    specs = [
        SensorSpec(
            name=f"s{i:03d}",
            use="bench",
            func=make_sensor(i, cycle, empty),
            schedule=Schedule(every_ms=60_000),
            timeout_ms=30_000,
            max_tasks=100,
            enabled=True,
            options={},
        )
        for i in range(sizes.sensors)
    ]
    if not empty:  # the 90 % that will be duplicates are already open
        known = [
            NewTask(f"known {k}", source=f"sensor:s{i:03d}", source_key=f"s{i:03d}:old-{k}")
            for i in range(sizes.sensors)
            for k in range(DUPLICATES)
        ]
        await store.add_tasks(known, actor="bench")
    return store, SensorRunner(store, settings, SystemClock(), specs), cycle


async def vigil_cycle(runner: SensorRunner, cycle: list[int]) -> tuple[float, float]:
    cycle[0] += 1
    cpu, start = cpu_now(), time.perf_counter()
    reports = await runner.run_now()
    wall, used = time.perf_counter() - start, cpu_now() - cpu
    assert all(r.ok for r in reports), [r.error for r in reports if not r.ok]
    return wall, used


def raw_setup(path: Path, sizes: Sizes) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE tasks (id INTEGER PRIMARY KEY, subject TEXT NOT NULL, source TEXT, source_key TEXT)")
    conn.execute("CREATE UNIQUE INDEX ux_key ON tasks (source_key)")
    conn.execute("CREATE TABLE sensor_state (name TEXT PRIMARY KEY, last_run_at INTEGER, created INTEGER, state TEXT)")
    conn.executemany(
        "INSERT INTO tasks (subject, source, source_key) VALUES (?, ?, ?)",
        [
            (f"known {k}", f"sensor:s{i:03d}", f"s{i:03d}:old-{k}")
            for i in range(sizes.sensors)
            for k in range(DUPLICATES)
        ],
    )
    return conn


def raw_cycle(conn: sqlite3.Connection, sizes: Sizes, cycle: int) -> tuple[float, float]:
    cpu, start = cpu_now(), time.perf_counter()
    for i in range(sizes.sensors):
        name = f"s{i:03d}"
        rows = [(f"sensor {i} known {k}", f"sensor:{name}", f"{name}:old-{k}") for k in range(DUPLICATES)]
        rows.append((f"sensor {i} new in cycle {cycle}", f"sensor:{name}", f"{name}:new-{cycle}"))
        conn.execute("BEGIN IMMEDIATE")
        created = sum(
            conn.execute(
                "INSERT INTO tasks (subject, source, source_key) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
                row,
            ).fetchone()
            is not None
            for row in rows
        )
        conn.execute(
            """INSERT INTO sensor_state (name, last_run_at, created, state) VALUES (?, ?, ?, '{}')
               ON CONFLICT (name) DO UPDATE SET last_run_at = excluded.last_run_at, created = excluded.created""",
            (name, time.time_ns() // 1_000_000, created),
        )
        conn.execute("COMMIT")
    return time.perf_counter() - start, cpu_now() - cpu


async def measure(tmp: Path, sizes: Sizes) -> tuple[str, list[str]]:
    full_store, full, full_cycle = await vigil_setup(tmp / "full" / "vigil.db", sizes, empty=False)
    empty_store, empty, empty_cycle = await vigil_setup(tmp / "empty" / "vigil.db", sizes, empty=True)
    raw = raw_setup(tmp / "raw.db", sizes)
    results = {"full": Cycle([], []), "empty": Cycle([], []), "raw": Cycle([], [])}
    try:
        for round_no in range(sizes.rounds + 1):  # round 0 warms up (first state rows, caches)
            for name in ("full", "empty", "raw")[round_no % 3 :] + ("full", "empty", "raw")[: round_no % 3]:
                if name == "full":
                    wall, cpu = await vigil_cycle(full, full_cycle)
                elif name == "empty":
                    wall, cpu = await vigil_cycle(empty, empty_cycle)
                else:
                    wall, cpu = raw_cycle(raw, sizes, round_no)
                if round_no:
                    results[name].wall_s.append(wall)
                    results[name].cpu_s.append(cpu)
        durability = synchronous_of(raw)
        open_tasks = len(await full_store.list_tasks(limit=10**6))
    finally:
        await full_store.close()
        await empty_store.close()
        raw.close()
    expected = sizes.sensors * (DUPLICATES + sizes.rounds + 1)
    assert open_tasks == expected, f"{open_tasks} tasks, expected {expected}: duplicates slipped through"
    n = sizes.sensors
    lines = [
        f"{n} sensors × {TASKS_PER_SENSOR} tasks ({DUPLICATES * 10} % duplicates), median of {sizes.rounds} cycles:",
        "",
        "| contender | durability | wall per cycle | CPU per cycle | wall per sensor | CPU per sensor |",
        "|---|---|---|---|---|---|",
        results["full"].row(f"Vigil: {n} sensors × 10 tasks, 90 % duplicates", n, durability),
        results["empty"].row(f"Vigil: {n} sensors returning nothing", n, durability),
        results["raw"].row("raw sqlite3: same inserts + state upsert, 1 transaction per sensor", n, durability),
    ]
    full_wall, raw_wall = median(results["full"].wall_s), median(results["raw"].wall_s)
    full_cpu, raw_cpu = median(results["full"].cpu_s), median(results["raw"].cpu_s)
    verdicts = [
        f"a full cycle takes {fmt_s(full_wall)} wall, {fmt_s(full_cpu)} CPU",
        f"per-sensor overhead beyond the raw database work: {fmt_s((full_cpu - raw_cpu) / n)} CPU, "
        f"{fmt_s((full_wall - raw_wall) / n)} wall",
        f"Vigil ÷ raw (speed): {raw_wall / full_wall:.2f}×",
    ]
    return "\n".join(lines), verdicts


def main(argv: list[str] | None = None) -> int:
    args = workload_args(__doc__.splitlines()[0], argv)
    sizes = QUICK if args.quick else FULL
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="vigil-bench-") as tmp:
        heading("One sensor cycle")
        text, verdicts = asyncio.run(measure(Path(tmp), sizes))
    print(text)
    heading("verdicts")
    print("\n".join(verdicts))
    if args.record and not args.quick:
        body = f"Command: `{command_line()}`. Machine: {machine()}.\n\n{text}\n\n" + "\n".join(
            f"- {v}" for v in verdicts
        )
        recorded = record("sensors_cycle", body)
        print("recorded in docs/performance.md" if recorded else "docs/performance.md has no sensors_cycle markers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
