"""The TUI on a home with 1,000,000 tasks (``--quick``: 50,000), 10,000 of them open.

Measured in one process running the real app headless (Textual's test driver, no
terminal output), on a database built through the real schema (``bench.million``):

* time to first full screen: from creating the app to the queue screen's first
  snapshot applied and painted;
* commit → row on screen: another *process* adds a task and prints the monotonic
  time right after its commit; the app's table is polled every millisecond for the
  row (the probe runs every 0.3 s, so this is dominated by where in the probe
  period the commit lands);
* CPU while idle: CPU seconds of the process over a minute (``--quick``: 5 s)
  with nothing changing, as % of one core, and how many reloads happened;
* memory: resident set size after the first screen and after the idle minute;
* keypress → screen (``bench.tui_keys``): filter (the last letter typed), sort
  (``s``), page down and open a task (``enter``), each from the key to the store's
  answer painted, p50 and p95 (target p95 ≤ 100 ms);
* a drain: a real ``vigil run`` (dry run) works through 2,000 due tasks on
  another home while the dashboard is open; the dashboard's CPU meanwhile, as % of
  one core (target ≤ 30 %).
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import TypedDict

from bench.harness import command_line, cpu_seconds, heading, machine, median, percentile, record, rss_mb, workload_args
from bench.million import build
from bench.tui_keys import DrainFigures, KeyFigures, drain, time_keys

FULL_TASKS = 1_000_000
QUICK_TASKS = 50_000
OPEN_TASKS = 10_000
ROUNDS = 20
QUICK_ROUNDS = 5
KEY_ROUNDS = 30
DRAIN_TASKS = 2_000
QUICK_DRAIN_TASKS = 200
KEY_TARGET_S = 0.100
DRAIN_TARGET_PCT = 30.0

ADDER = """
import asyncio, sys, time
from pathlib import Path
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore

async def main():
    store = await SqliteStore.open(Path(sys.argv[1]))
    for line in sys.stdin:
        # due since 1970 at priority 1: first in the dispatcher's order, so in the first window
        result = await store.add_task(NewTask(line.strip(), priority=1, scheduled_for=0))
        print(result.task_id, time.monotonic(), flush=True)
    await store.close()

asyncio.run(main())
"""


class Figures(TypedDict):
    """What ``measure`` reports: seconds, MB, per-round latencies in seconds."""

    first_screen_s: float
    rss_first_mb: float
    latency: list[float]
    idle_cpu_pct: float
    idle_reloads: int
    rss_idle_mb: float
    keys: KeyFigures


async def measure(home: Path, rounds: int, idle_s: float, key_rounds: int) -> Figures:
    from tui.app import VigilApp
    from tui.queue_table import QueueTable
    from vigil.clock import SystemClock
    from vigil.config import load_settings
    from vigil.store import open_store

    settings = load_settings(home)
    start = time.monotonic()
    app = VigilApp(settings, opener=lambda: open_store(settings), clock=SystemClock())
    async with app.run_test(size=(120, 40)) as pilot:
        while not (hasattr(app, "ctx") and app.queue_screen.loads >= 1):  # noqa: ASYNC110 - polling is the measurement
            await asyncio.sleep(0.001)
        await pilot.pause()
        first_screen_s = time.monotonic() - start
        rss_first_mb = rss_mb()
        table = app.queue_screen.query_one(QueueTable)

        adder = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            ADDER,
            str(settings.store.path),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert adder.stdin is not None
        assert adder.stdout is not None
        latencies: list[float] = []
        for n in range(rounds):
            await asyncio.sleep(random.uniform(0.05, 0.35))  # land anywhere in the probe period
            adder.stdin.write(f"bench row {n}\n".encode())
            await adder.stdin.drain()
            line = (await adder.stdout.readline()).decode()
            task_id, committed = int(line.split()[0]), float(line.split()[1])
            while task_id not in table.tasks:  # noqa: ASYNC110 - polling is the measurement
                await asyncio.sleep(0.001)
            await pilot.pause()
            latencies.append(time.monotonic() - committed)
        adder.stdin.close()
        await adder.wait()

        loads = app.queue_screen.loads
        cpu0, t0 = cpu_seconds(), time.monotonic()
        await asyncio.sleep(idle_s)
        idle_cpu_pct = (cpu_seconds() - cpu0) / (time.monotonic() - t0) * 100
        idle_reloads = app.queue_screen.loads - loads
        rss_idle_mb = rss_mb()
        keys = await time_keys(app, pilot, key_rounds)
    return Figures(
        first_screen_s=first_screen_s,
        rss_first_mb=rss_first_mb,
        latency=latencies,
        idle_cpu_pct=idle_cpu_pct,
        idle_reloads=idle_reloads,
        rss_idle_mb=rss_idle_mb,
        keys=keys,
    )


def key_row(what: str, samples: list[float], cpu: list[float]) -> tuple[str, str]:
    p95 = percentile(samples, 95)
    met = "met" if p95 <= KEY_TARGET_S else "not met"
    return (
        f"keypress → screen: {what} ({len(samples)} presses)",
        f"p50 {median(samples) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {max(samples) * 1000:.0f} ms"
        f" (target p95 ≤ {KEY_TARGET_S * 1000:.0f} ms: {met}); CPU per press: median {median(cpu) * 1000:.0f} ms,"
        f" p95 {percentile(cpu, 95) * 1000:.0f} ms",
    )


def drain_home(folder: Path, tasks: int) -> Path:
    """A home of ``tasks`` due tasks for the drain (dry run: the default of a new home)."""
    from vigil.config import load_settings
    from vigil.home import init_home

    home = folder / "drain"
    init_home(home)
    skill = home / "skills" / "web"  # bench.million gives every task this skill
    skill.mkdir()
    (skill / "SKILL.md").write_text(
        "---\nname: web\ndescription: Work on the web site.\n---\nWork on the web site.\n", encoding="utf-8"
    )
    build(load_settings(home).store.path, total=tasks, open_tasks=tasks, now_ms=int(time.time() * 1000) - 60_000)
    return home


def main() -> None:
    args = workload_args(__doc__.splitlines()[0])
    total = QUICK_TASKS if args.quick else FULL_TASKS
    rounds = QUICK_ROUNDS if args.quick else ROUNDS
    key_rounds = QUICK_ROUNDS if args.quick else KEY_ROUNDS
    drained = QUICK_DRAIN_TASKS if args.quick else DRAIN_TASKS
    idle_s = 5.0 if args.quick else 60.0
    where = machine()
    heading(f"TUI on {total:,} tasks ({OPEN_TASKS:,} open)")
    with tempfile.TemporaryDirectory(prefix="vigil-bench-tui-") as folder:
        from vigil.config import load_settings
        from vigil.home import init_home

        home = Path(folder) / "home"
        init_home(home)
        t0 = time.monotonic()
        build(load_settings(home).store.path, total=total, open_tasks=OPEN_TASKS, now_ms=int(time.time() * 1000))
        build_s = time.monotonic() - t0
        db_mb = load_settings(home).store.path.stat().st_size / 1e6
        result = asyncio.run(measure(home, rounds, idle_s, key_rounds))
        drain_figures: DrainFigures = asyncio.run(drain(drain_home(Path(folder), drained), drained))
    latency = result["latency"]
    keys = result["keys"]
    cpu_met = "met" if drain_figures["cpu_pct"] <= DRAIN_TARGET_PCT else "not met"
    rows = [
        (
            "database",
            f"{total:,} tasks, {OPEN_TASKS:,} open, {db_mb:.0f} MB (built in {build_s:.1f} s, not part of the figures)",
        ),
        ("time to first full screen", f"{result['first_screen_s'] * 1000:.0f} ms"),
        (
            f"commit → row on screen ({rounds} commits from another process)",
            f"median {median(latency) * 1000:.0f} ms, p95 {percentile(latency, 95) * 1000:.0f} ms,"
            f" max {max(latency) * 1000:.0f} ms",
        ),
        key_row("filter (last letter typed)", keys["filter"], keys["cpu"]["filter"]),
        key_row("sort (s)", keys["sort"], keys["cpu"]["sort"]),
        key_row("page down", keys["page_down"], keys["cpu"]["page_down"]),
        key_row("open a task (enter)", keys["open_task"], keys["cpu"]["open_task"]),
        (
            f"CPU while idle ({idle_s:.0f} s, nothing changing)",
            f"{result['idle_cpu_pct']:.2f} % of one core; {result['idle_reloads']} reloads",
        ),
        (
            f"drain: vigil run (dry run) completes {drained:,} tasks, dashboard open",
            f"{drain_figures['seconds']:.1f} s; dashboard CPU {drain_figures['cpu_pct']:.1f} % of one core"
            f" (target ≤ {DRAIN_TARGET_PCT:.0f} %: {cpu_met}); {drain_figures['refreshes']} refreshes",
        ),
        (
            "memory (RSS)",
            f"{result['rss_first_mb']:.0f} MB after the first screen, {result['rss_idle_mb']:.0f} MB idle",
        ),
    ]
    text = "| measure | result |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows)
    print(text)
    if args.record:
        done = record("tui_million", f"Command: `{command_line()}`. Machine: {where}.\n\n{text}")
        print("recorded in docs/performance.md" if done else "markers <!-- bench:tui_million --> not found")


if __name__ == "__main__":
    main()
