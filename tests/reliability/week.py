"""The simulated week: ``vigil run`` for simulated days under an accelerated clock.

    python -m tests.reliability.week --days 7 --factor 1440 --csv week.csv

The real daemon (sensors runner, dispatcher, guard, periodic jobs) runs with
``VIGIL_ACCELERATED_CLOCK=<factor>@<anchor>``: 100 ``schedule`` sensors make a task
each every ``--every`` of simulated time, and the fast fake agent
(tests/fakes/claude_week.sh, the real stream-json format) draws an outcome per run:
success, overloaded and crashes (retried with backoff), out of turns (failed), usage
limits (the loop gates until the reset) and long runs, which this harness cancels
the way a person does (``vigil task cancel``). Retention prunes old finished tasks.

From outside, every ``POLL_S`` real seconds, it checks that no task is active
without an open run and that no due task was left unclaimed while the loop went
idle with its gate open; every ``--sample`` of simulated time it records the loop's
RSS, open descriptors, child processes, the database, WAL and transcript sizes,
task counts, and the gap between the cost roll-up and what the agent reported
(its ledger). ``week_judge`` turns the series into findings.

With ``[retention] keep_costs`` the store forgets the spend of what it pruned
longest ago, so the roll-up is compared with the ledger over the window the store
still covers (``cost_window``): from an hour (or, past the archive's hour rows, a
day) boundary after ``keep_costs`` ago.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.reliability.soak import _alive, _descendants, _proc_value, fds_at_rest
from tests.reliability.week_observer import HOUR_MS, Observer, logged_alerts, remember, start_time
from vigil.clock import ACCELERATED_CLOCK_ENV, AcceleratedClock
from vigil.durations import parse_duration_ms

FAKE = Path(__file__).resolve().parent.parent / "fakes" / "claude_week.sh"
POLL_S = 0.2  # real seconds between the cheap checks (and cancels)
DAY_MS = 24 * HOUR_MS
LONG_SHARE = 20  # the fake's long runs: run id x 7919 mod 1000 below this
MAX_RUN_COST = 0.0099  # the most one run of the fake reports (USD)

CONFIG = """\
[dispatch]
executor = "claude"
max_retries = 2
# The first step of a task's retry (the default; the loop's own backoff after a
# transient failure is [dispatch] outage_backoff's, 30 s while an outage is young).
# The fake's overloads and crashes are scattered, not an outage: at 5m each one held
# the whole loop for 5 simulated minutes, half the day in all, and the queue never
# drained.
retry_backoff = "30s"
retry_backoff_max = "1h"
usage_limit_fallback = "30m"
# real seconds: an executor timeout is about a real process
timeout = "1m"
heartbeat = "2m"
# simulated: at k = 1440 an hour is 2.5 real seconds, so a loaded machine's stall
# of the event loop does not look like a dead dispatcher to crash recovery
lease = "1h"
shutdown_grace = "2s"

[executors.claude]
command = ["/bin/sh", {fake}, "--ledger", {ledger}, "--clock", "{clock}", "--long", "{long_s}"]

[limits]
max_consecutive_failures = 0
max_per_source_per_day = 0

[alerts]
# A real second of a loaded machine is 24 simulated minutes at k = 1440: a
# heartbeat late by a few real seconds must not read as a dead dispatcher.
stale_dispatcher = "2h"
"""
SENSOR = """
[[sensors]]
use = "schedule"
name = "s{n}"
every = "{every}"
subject = "tick {n} {{datetime}}"
"""


@dataclass(frozen=True)
class WeekPlan:
    """What to simulate. Durations in simulated time unless named ``_s`` (real)."""

    days: float = 7.0
    factor: int = 1440  # a simulated day per real minute
    sensors: int = 100
    every: str = "2h"
    keep_finished: str | None = "1d"  # the [retention] setting; None: no retention
    keep_costs: str | None = None  # [retention] keep_costs; None: kept forever
    keep_keys: str | None = None  # [retention] keep_keys; None: kept forever
    sample_ms: int = HOUR_MS
    long_s: float = 1.0


@dataclass
class Sample:
    sim_h: float  # simulated hours since the start
    real_s: float
    rss_kib: int
    fds: int
    children: int
    db_bytes: int
    wal_bytes: int
    transcripts: int
    transcript_bytes: int
    open_tasks: int
    finished_tasks: int  # still in the database
    oldest_kept_h: float  # simulated hours since the oldest of them finished (0: none kept)
    pruned_tasks: int  # created but no longer in the database
    archive_rows: int  # what pruned tasks leave behind (Counts)
    retired_keys: int
    archive_bytes: int
    oldest_leftover_h: float  # simulated hours since the oldest archive row's span ended or key retired
    rollup_usd: float
    ledger_low_usd: float  # the ledger just before the roll-up was read ...
    ledger_high_usd: float  # ... and just after


@dataclass
class WeekReport:
    plan: WeekPlan
    samples: list[Sample] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # invariant breaches seen while running
    polls: int = 0
    idle_polls: int = 0  # polls that found the loop idle with its gate open
    ended_as: set[str] = field(default_factory=set)  # failed, canceled: seen at some poll (Observer)
    cancels_sent: list[int] = field(default_factory=list)
    exit_code: int | None = None
    left_active: int = 0
    leftover_processes: list[int] = field(default_factory=list)
    by_status: dict[str, int] = field(default_factory=dict)
    integrity: str = ""
    ledger_usd: float = 0.0  # over the cost window at the end
    ledger_tokens: tuple[int, int] = (0, 0)
    # the last run the agent reported before that window: it alone may have been
    # recorded (finished) inside it, so the roll-up may count it too
    straddle_usd: float = 0.0
    straddle_tokens: tuple[int, int] = (0, 0)
    rollup_usd: float = 0.0
    rollup_tokens: tuple[int, int] = (0, 0)
    outcomes: dict[str, int] = field(default_factory=dict)  # runs that ended by themselves
    alerts: dict[str, int] = field(default_factory=dict)  # alert events the daemon logged, by kind


def write_home(home: Path, plan: WeekPlan, clock: AcceleratedClock, ledger: Path) -> None:
    config = CONFIG.format(
        fake=json.dumps(str(FAKE)),
        ledger=json.dumps(str(ledger)),
        clock=f"{clock.factor:g}@{clock.anchor_ms}",
        long_s=plan.long_s,
    )
    if plan.keep_finished is not None:
        config += f'\n[retention]\nkeep_finished = "{plan.keep_finished}"\n'
        for key, value in (("keep_costs", plan.keep_costs), ("keep_keys", plan.keep_keys)):
            if value is not None:
                config += f'{key} = "{value}"\n'
    config += "".join(SENSOR.format(n=n, every=plan.every) for n in range(plan.sensors))
    (home / "vigil.toml").write_text(config, encoding="utf-8")


@dataclass
class Ledger:
    """What the fake agent reported at or after ``since_ms`` (simulated): USD,
    tokens, and runs by outcome; ``straddle`` is the last report before it."""

    usd: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    straddle: tuple[float, int, int] = (0.0, 0, 0)


def read_ledger(path: Path, since_ms: int = 0) -> Ledger:
    ledger = Ledger()
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text(encoding="ascii").splitlines():
            parts = line.split()
            if len(parts) != 6:  # a line being appended is complete or absent (O_APPEND)
                continue
            usd, tokens_in, tokens_out = float(parts[1]), int(parts[2]), int(parts[3])
            if int(parts[5]) < since_ms:
                ledger.straddle = (usd, tokens_in, tokens_out)
                continue
            ledger.usd += usd
            ledger.tokens_in += tokens_in
            ledger.tokens_out += tokens_out
            ledger.outcomes[parts[4]] = ledger.outcomes.get(parts[4], 0) + 1
    return ledger


def cost_window(plan: WeekPlan, now_ms: int) -> int:
    """Where the store's roll-up is still whole at ``now_ms`` (epoch ms; 0: all
    time): archive rows that ended before ``now - keep_costs`` may be gone, so the
    window starts at the next boundary of the rows after it. An hour boundary is
    exact while it lies within the archive's hour rows (48 h back, from the start
    of that UTC day); before that, only a day boundary is."""
    if plan.keep_costs is None or plan.keep_finished is None:
        return 0
    edge = now_ms - parse_duration_ms(plan.keep_costs)
    hour = -(-edge // HOUR_MS) * HOUR_MS
    if hour >= (now_ms - 2 * DAY_MS) // DAY_MS * DAY_MS:
        return max(hour, 0)
    return max(-(-edge // DAY_MS) * DAY_MS, 0)


async def _rollup(home: Path, since_ms: int) -> tuple[float, int, int]:
    """Spend and tokens since ``since_ms`` by ``Store.cost_rollup`` (pruned included)."""
    from vigil.config import load_settings
    from vigil.store import CostGroup, open_store

    store = await open_store(load_settings(home))
    try:
        rows = await store.cost_rollup(since_ms=since_ms, by=CostGroup.DAY)
    finally:
        await store.close()
    return sum(r.cost_usd for r in rows), sum(r.tokens_in for r in rows), sum(r.tokens_out for r in rows)


def rollup(home: Path, since_ms: int = 0) -> tuple[float, int, int]:
    import asyncio

    return asyncio.run(_rollup(home, since_ms))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _transcripts(home: Path) -> tuple[int, int]:
    folder = home / "logs" / "runs"
    count = size = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            count += 1
            with contextlib.suppress(FileNotFoundError):
                size += entry.stat().st_size
    return count, size


def is_long_run(run_id: int) -> bool:
    return run_id * 7919 % 1000 < LONG_SHARE


def _cancel(home: Path, env: dict[str, str], task_id: int) -> subprocess.Popen[bytes]:
    """A person cancels a running task from another terminal."""
    return subprocess.Popen(
        [sys.executable, "-m", "vigil", "--home", str(home), "task", "cancel", str(task_id)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def run_week(home: Path, plan: WeekPlan, *, progress: bool = False) -> WeekReport:
    """Simulate ``plan`` on ``home`` (initialised; its vigil.toml is replaced)."""
    clock = AcceleratedClock(plan.factor)
    ledger = home / "ledger.txt"
    write_home(home, plan, clock, ledger)
    db = home / "data" / "vigil.db"
    report = WeekReport(plan)
    observer = Observer(db, clock)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    daemon_env = {**env, ACCELERATED_CLOCK_ENV: f"{clock.factor:g}@{clock.anchor_ms}"}
    end_ms = clock.anchor_ms + int(plan.days * DAY_MS)
    next_sample = clock.anchor_ms + plan.sample_ms
    cancels: list[subprocess.Popen[bytes]] = []
    canceled_runs: set[int] = set()
    seen: dict[int, bytes] = {}  # pid -> its start time: pids are reused over a week
    started = time.monotonic()
    with (home / "logs" / "week-run.out").open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=daemon_env,
        )
    try:
        while clock.now_ms() < end_ms and proc.poll() is None:
            time.sleep(POLL_S)
            remember(seen, _descendants(proc.pid))
            for task_id, run_id in observer.poll():
                if is_long_run(run_id) and run_id not in canceled_runs:
                    canceled_runs.add(run_id)
                    report.cancels_sent.append(task_id)
                    cancels.append(_cancel(home, env, task_id))
            if clock.now_ms() >= next_sample:
                next_sample += plan.sample_ms
                if not observer.dispatcher_seen:
                    # still starting (a loaded machine takes seconds, simulated hours):
                    # its descriptors and memory are no baseline for the day
                    continue
                report.samples.append(_sample(plan, home, proc.pid, observer, clock, ledger, started, seen))
                if progress:
                    _print_progress(report.samples[-1])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        report.exit_code = proc.wait(timeout=120)
        for cancel in cancels:
            cancel.wait(timeout=120)
    report.polls, report.idle_polls, report.problems = observer.polls, observer.idle_polls, observer.problems
    report.ended_as = observer.ended_as
    time.sleep(0.5)
    report.leftover_processes = [pid for pid, start in seen.items() if _alive(pid) and start_time(pid) == start]
    _finish(report, home, db, ledger, cost_window(plan, clock.now_ms()))
    return report


def _sample(
    plan: WeekPlan,
    home: Path,
    pid: int,
    observer: Observer,
    clock: AcceleratedClock,
    ledger: Path,
    started: float,
    seen: dict[int, bytes],
) -> Sample:
    db = observer.db
    children = _descendants(pid)
    remember(seen, children)
    counts = observer.counts()
    since = cost_window(plan, clock.now_ms())
    low = read_ledger(ledger, since).usd
    usd = rollup(home, since)[0] if db.exists() else 0.0
    after = read_ledger(ledger, since)
    high = after.usd + after.straddle[0]
    count, size = _transcripts(home)
    return Sample(
        sim_h=round((clock.now_ms() - clock.anchor_ms) / HOUR_MS, 2),
        real_s=round(time.monotonic() - started, 1),
        rss_kib=_proc_value(pid, "VmRSS"),
        fds=fds_at_rest(pid, children),
        children=len(children),
        db_bytes=_size(db),
        wal_bytes=_size(Path(f"{db}-wal")),
        transcripts=count,
        transcript_bytes=size,
        open_tasks=counts.open,
        finished_tasks=counts.finished,
        oldest_kept_h=_age_h(clock.now_ms(), counts.oldest_finished_at),
        pruned_tasks=counts.pruned,
        archive_rows=counts.archive_rows,
        retired_keys=counts.retired_keys,
        archive_bytes=counts.archive_bytes,
        oldest_leftover_h=_age_h(clock.now_ms(), counts.oldest_archive_end, counts.oldest_retired_at),
        rollup_usd=usd,
        ledger_low_usd=low,
        ledger_high_usd=high,
    )


def _age_h(now_ms: int, *times_ms: int | None) -> float:
    """Simulated hours since the earliest of ``times_ms`` (0: none)."""
    known = [t for t in times_ms if t is not None]
    return round((now_ms - min(known)) / HOUR_MS, 2) if known else 0.0


def _finish(report: WeekReport, home: Path, db: Path, ledger: Path, since_ms: int) -> None:
    """After the stop: what is left, integrity, and the roll-up against the ledger
    over the cost window that starts at ``since_ms``."""
    conn = sqlite3.connect(db)
    try:
        report.left_active = conn.execute("SELECT COUNT(*) FROM tasks WHERE status = 'active'").fetchone()[0]
        report.by_status = dict(conn.execute("SELECT status, COUNT(*) FROM tasks GROUP BY status").fetchall())
        report.integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()
    reported = read_ledger(ledger, since_ms)
    report.ledger_usd, report.ledger_tokens = reported.usd, (reported.tokens_in, reported.tokens_out)
    report.straddle_usd, report.straddle_tokens = reported.straddle[0], reported.straddle[1:]
    report.outcomes = read_ledger(ledger).outcomes
    report.alerts = logged_alerts(home / "logs")
    total, rolled_in, rolled_out = rollup(home, since_ms)
    report.rollup_usd, report.rollup_tokens = total, (rolled_in, rolled_out)


def _print_progress(s: Sample) -> None:
    print(
        f"{s.sim_h:7.1f} h {s.real_s:7.1f} s  RSS {s.rss_kib / 1024:6.1f} MiB  DB {s.db_bytes / 2**20:6.2f} MiB"
        f"  WAL {s.wal_bytes / 2**20:5.2f} MiB  open {s.open_tasks:5}  kept {s.finished_tasks:6}"
        f"  pruned {s.pruned_tasks:6}",
        file=sys.stderr,
        flush=True,
    )


def main(argv: list[str]) -> int:
    import argparse
    import tempfile

    from tests.reliability.week_judge import judge, judge_leftovers, markdown, write_csv
    from vigil.durations import parse_duration_ms
    from vigil.home import init_home

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--days", type=float, default=7.0, help="simulated days")
    parser.add_argument("--factor", type=int, default=1440, help="simulated seconds per real second")
    parser.add_argument("--sensors", type=int, default=100)
    parser.add_argument("--every", default="2h", help="each sensor's interval (simulated)")
    parser.add_argument("--keep", default="1d", help="[retention] keep_finished, or 'none'")
    parser.add_argument("--keep-costs", default="4d", help="[retention] keep_costs, or 'none' (forever)")
    parser.add_argument("--keep-keys", default="1d", help="[retention] keep_keys, or 'none' (forever)")
    parser.add_argument("--sample", default="1h", help="sampling interval (simulated)")
    parser.add_argument("--table-every", type=float, default=12.0, help="simulated hours per table row")
    parser.add_argument("--csv", type=Path, help="write every sample here")
    parser.add_argument("--home", type=Path, help="run in this new folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    plan = WeekPlan(
        days=args.days,
        factor=args.factor,
        sensors=args.sensors,
        every=args.every,
        keep_finished=None if args.keep == "none" else args.keep,
        keep_costs=None if args.keep_costs == "none" else args.keep_costs,
        keep_keys=None if args.keep_keys == "none" else args.keep_keys,
        sample_ms=parse_duration_ms(args.sample),
    )
    with tempfile.TemporaryDirectory() as folder:
        home = args.home or Path(folder) / "home"
        init_home(home)
        report = run_week(home, plan, progress=True)
    if args.csv is not None:
        write_csv(report.samples, args.csv)
    print(markdown(report.samples, args.table_every))
    print(
        f"exit {report.exit_code}; by status {report.by_status}; left active {report.left_active}; "
        f"cancels sent {len(report.cancels_sent)}; runs by outcome {report.outcomes}; "
        f"roll-up ${report.rollup_usd:.4f} vs ledger ${report.ledger_usd:.4f} (last run before the window "
        f"${report.straddle_usd:.4f}); tokens {report.rollup_tokens} vs {report.ledger_tokens}; "
        f"polls {report.polls} ({report.idle_polls} idle); alerts {report.alerts}; "
        f"integrity {report.integrity}"
    )
    found = judge(report) + judge_leftovers(report)
    for line in found:
        print(f"FINDING: {line}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
