"""Contention: a real ``vigil run`` dispatching while 8 processes add and
reprioritise tasks as fast as they can, for 60 s (``--quick``: 5 s).

Each writer is its own OS process with its own connection, opened the way the CLI
opens it (the home's settings: WAL, ``synchronous=FULL``, ``busy_timeout``). It
alternates ``add_task`` with ``set_priority`` on one of its recent tasks. The
dispatcher (dry-run executor) claims and finishes tasks meanwhile, so writers and
dispatcher fight for SQLite's single write lock the whole time.

What must hold: no error reaches a caller (``StoreBusy``, ``StoreError`` or anything
unexpected). ``InvalidTransition`` from ``set_priority`` is not an error: it is the
store's answer when the dispatcher took the task first, and is counted apart.
Reported: write latency (median, p99, max) as each writer's caller saw it, the
dispatcher's throughput meanwhile, and a final check of the database.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.harness import (
    command_line,
    cpu_seconds,
    fmt_s,
    heading,
    machine,
    median,
    percentile,
    record,
    rss_mb,
    workload_args,
)

WRITERS = 8
FULL_S = 60.0
QUICK_S = 5.0
SAFETY_S = 60.0


# --- one writer process ----------------------------------------------------------------


async def _write_for(home: Path, start_at: float, seconds: float, seed: int) -> dict[str, object]:
    """Add and reprioritise until ``start_at + seconds`` (epoch s); the summary."""
    from vigil.config import load_settings
    from vigil.errors import InvalidTransition
    from vigil.models import NewTask
    from vigil.store import open_store

    rng = random.Random(seed)
    store = await open_store(load_settings(home))
    add_s: list[float] = []
    prio_s: list[float] = []
    refused = 0
    errors: Counter[str] = Counter()
    first_error = ""
    mine: list[int] = []
    await asyncio.sleep(max(0.0, start_at - time.time()))
    try:
        while time.time() < start_at + seconds:
            try:
                t0 = time.perf_counter()
                result = await store.add_task(NewTask(subject=f"writer {seed} task {len(add_s)}"), actor="human")
                add_s.append(time.perf_counter() - t0)
                if result.task_id is not None:
                    mine = [*mine[-19:], result.task_id]
                t0 = time.perf_counter()
                try:
                    await store.set_priority(rng.choice(mine), rng.randint(1, 9), actor="human")
                except InvalidTransition:
                    refused += 1  # the dispatcher took it first: an answer, not an error
                prio_s.append(time.perf_counter() - t0)
            except Exception as err:
                errors[type(err).__name__] += 1
                first_error = first_error or f"{type(err).__name__}: {err}"
    finally:
        await store.close()
    return {
        "add_s": add_s,
        "prio_s": prio_s,
        "refused": refused,
        "errors": dict(errors),
        "first_error": first_error,
        "cpu_s": cpu_seconds(),
    }


def writer_main(argv: list[str]) -> int:
    """``--writer HOME START_AT SECONDS SEED``: one writer; prints its summary as JSON."""
    home, start_at, seconds, seed = Path(argv[0]), float(argv[1]), float(argv[2]), int(argv[3])
    print(json.dumps(asyncio.run(_write_for(home, start_at, seconds, seed))))
    return 0


# --- the run ------------------------------------------------------------------------


def _wait(what: str, check: object, timeout_s: float = SAFETY_S) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _dispatcher_ready(db: Path) -> bool:
    if not db.exists():
        return False
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            row = conn.execute("SELECT value FROM loop_state WHERE key = 'dispatcher'").fetchone()
    except sqlite3.OperationalError:
        return False
    return row is not None


def _counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db, timeout=30) as conn:
        return {str(s): int(n) for s, n in conn.execute("SELECT status, count(*) FROM tasks GROUP BY status")}


def _latency_row(what: str, samples: list[float]) -> str:
    p50, p99 = fmt_s(median(samples)), fmt_s(percentile(samples, 99))
    worst = fmt_s(max(samples)) if samples else "–"
    return f"| {what} | {len(samples):,} | {p50} | {p99} | {worst} |"


def run(seconds: float, folder: Path) -> tuple[str, bool]:
    from vigil.config import load_settings
    from vigil.home import init_home

    home = folder / "home"
    init_home(home)
    db = load_settings(home).store.path
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    log_path = folder / "run.log"
    with log_path.open("wb") as log:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"], stdout=log, stderr=subprocess.STDOUT, env=env
        )
        try:
            _wait("vigil run to start dispatching", lambda: _dispatcher_ready(db))
            start_at = time.time() + 2.0  # every writer imported and connected by then
            cpu_before = cpu_seconds(daemon.pid)
            writers = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "bench.contention",
                        "--writer",
                        str(home),
                        str(start_at),
                        str(seconds),
                        str(n),
                    ],
                    stdout=subprocess.PIPE,
                    env=env,
                    text=True,
                )
                for n in range(WRITERS)
            ]
            outputs = [w.communicate(timeout=seconds + SAFETY_S)[0] for w in writers]
            daemon_cpu = cpu_seconds(daemon.pid) - cpu_before
            daemon_rss = rss_mb(daemon.pid)
            codes = [w.returncode for w in writers]
            done_during = _counts(db).get("completed", 0)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon_code = daemon.wait(timeout=SAFETY_S)
    summaries = [json.loads(out) for out in outputs if out.strip()]
    adds = [x for s in summaries for x in s["add_s"]]
    prios = [x for s in summaries for x in s["prio_s"]]
    errors: Counter[str] = Counter()
    for s in summaries:
        errors.update(s["errors"])
    first = next((s["first_error"] for s in summaries if s["first_error"]), "")
    refused = sum(int(s["refused"]) for s in summaries)
    counts = _counts(db)
    with sqlite3.connect(db) as conn:
        check = str(conn.execute("PRAGMA quick_check").fetchone()[0])
    log_text = log_path.read_text(errors="replace")
    traceback_in_log = "Traceback" in log_text
    ok = (
        not errors
        and all(code == 0 for code in codes)
        and len(summaries) == WRITERS
        and check == "ok"
        and sum(counts.values()) == len(adds)
        and daemon_code == 0
        and not traceback_in_log
    )
    error_text = (
        "none" if not errors else ", ".join(f"{n} × {name}" for name, n in errors.items()) + f" (first: {first})"
    )
    lines = [
        f"{WRITERS} writer processes for {seconds:.0f} s against `vigil run` (dry-run executor), "
        "all at synchronous=FULL, WAL.",
        "",
        "| writes (as each caller saw them) | count | median | p99 | max |",
        "|---|---|---|---|---|",
        _latency_row("`add_task`", adds),
        _latency_row("`set_priority`", prios),
        _latency_row("both", adds + prios),
        "",
        f"- Errors that reached a caller: **{error_text}**; writer exit codes {sorted(set(codes))}.",
        f"- `set_priority` refused because the dispatcher had taken the task: {refused:,} (the store's answer).",
        f"- Dispatcher: {done_during:,} tasks completed during the run ({done_during / seconds:,.0f}/s), "
        f"{daemon_cpu / seconds * 100:.0f} % of a core, RSS {daemon_rss:.0f} MB; exit code {daemon_code} "
        f"after SIGTERM; traceback in its log: {'yes' if traceback_in_log else 'no'}.",
        f"- Afterwards: {sum(counts.values()):,} tasks for {len(adds):,} acknowledged adds "
        f"({', '.join(f'{n:,} {s}' for s, n in sorted(counts.items()))}); `PRAGMA quick_check`: {check}.",
    ]
    return "\n".join(lines), ok


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--writer"]:
        return writer_main(argv[1:])
    args = workload_args(__doc__.splitlines()[0], argv)
    where = machine()
    print(f"machine: {where}")
    seconds = QUICK_S if args.quick else FULL_S
    heading(f"contention: vigil run + {WRITERS} writer processes, {seconds:.0f} s")
    with tempfile.TemporaryDirectory(prefix="vigil-bench-") as tmp:
        text, ok = run(seconds, Path(tmp))
    print(text)
    print(f"\nverdict: {'no error reached a caller' if ok else 'FAILED: see above'}")
    if args.record and not args.quick:
        done = record("contention", f"Command: `{command_line()}`. Machine: {where}.\n\n{text}")
        print("recorded in docs/performance.md" if done else "docs/performance.md has no contention markers")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
