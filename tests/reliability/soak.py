"""Soak: ``vigil run`` with many sensors and a fast fake agent with mixed outcomes,
sampled over time (real clock: no retention or accelerated clock yet).

    python -m tests.reliability.soak --minutes 10 --sensors 100

Every ``--every`` each of the ``schedule`` sensors makes one task; each task runs
the fake ``claude`` (tests/fakes/claude_fake.py) with an outcome drawn per run:
success 70 %, overloaded (retried) 10 %, crash (retried) 10 %, out of turns
(failed) 10 %. Samples every ``--sample`` seconds: the loop's RSS, its open file
descriptors, its child processes, the database and WAL sizes, open tasks, the
oldest active task's age. After a SIGTERM: no task active, no process of the run
left, integrity ok.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from vigil.models import HEARTBEAT_KEY

FAKE = Path(__file__).resolve().parent.parent / "fakes" / "claude_fake.py"
MIXED = """\
import os, random, sys
scenario = random.choices(["success", "overloaded", "crash", "max_turns"], [70, 10, 10, 10])[0]
os.execv(sys.executable, [sys.executable, {fake}, scenario, *sys.argv[1:]])
"""
CONFIG = """\
[dispatch]
executor = "claude"
max_retries = 2
retry_backoff = "100ms"
retry_backoff_max = "2s"
outage_backoff = ["100ms", "2s"]
min_gate = "100ms"
timeout = "1m"
heartbeat = "1s"
shutdown_grace = "2s"

[executors.claude]
command = [{python}, {mixed}]

[limits]
max_consecutive_failures = 0
max_per_source_per_day = 0
"""
SENSOR = """
[[sensors]]
use = "schedule"
name = "s{n}"
every = "{every}"
subject = "tick {n} {{datetime}}"
"""


@dataclass
class Sample:
    at_s: float
    rss_kib: int
    fds: int  # open descriptors, less the pipes of live children (fds_at_rest)
    children: int
    db_bytes: int
    wal_bytes: int
    open_tasks: int
    finished_tasks: int
    oldest_active_s: float


@dataclass
class SoakReport:
    samples: list[Sample] = field(default_factory=list)
    left_active: int = 0
    leftover_processes: list[int] = field(default_factory=list)
    integrity: str = ""
    exit_code: int | None = None
    by_status: dict[str, int] = field(default_factory=dict)


def _proc_value(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def _descendants(pid: int) -> list[int]:
    """Every live process whose parent chain reaches ``pid``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_bytes().rpartition(b")")[2].split()
            except OSError:
                continue
            if stat[0] != b"Z":
                parents[int(entry.name)] = int(stat[1])
    found = []
    for child in parents:
        parent = parents.get(child)
        while parent is not None and parent > 1:
            if parent == pid:
                found.append(child)
                break
            parent = parents.get(parent)
    return found


def _links(pid: int) -> list[str]:
    """What each open descriptor of ``pid`` points at (``pipe:[123]``, a path …)."""
    links: list[str] = []
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # it has just ended
        return links
    for name in names:
        with contextlib.suppress(OSError):  # closed meanwhile
            links.append(os.readlink(f"/proc/{pid}/fd/{name}"))
    return links


def fds_at_rest(pid: int, children: list[int]) -> int:
    """``pid``'s open descriptors, less the pipes it shares with a live descendant:
    a run's (or a command sensor's) stdin, stdout and stderr come and go with it, so
    counting them would make a sample taken between two runs look like a drop, and
    any other sample like a rise. A pipe left open after its child ended still
    counts: that is a leak."""
    shared = {link for child in children for link in _links(child) if link.startswith("pipe:")}
    return sum(1 for link in _links(pid) if link not in shared)


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def write_home(home: Path, *, sensors: int, every: str) -> None:
    mixed = home / "mixed_agent.py"
    mixed.write_text(MIXED.format(fake=json.dumps(str(FAKE))), encoding="utf-8")
    config = CONFIG.format(python=json.dumps(sys.executable), mixed=json.dumps(str(mixed)))
    config += "".join(SENSOR.format(n=n, every=every) for n in range(sensors))
    (home / "vigil.toml").write_text(config, encoding="utf-8")


def soak(
    home: Path,
    *,
    seconds: float,
    sensors: int,
    every: str,
    sample_s: float,
    min_finished: int = 0,
    max_seconds: float | None = None,
) -> SoakReport:
    """Run the soak on ``home`` (initialised; its vigil.toml is replaced) for
    ``seconds``, and past them, up to ``max_seconds``, until ``min_finished`` tasks
    have finished: a loaded machine runs fewer a second, and the samples mean
    something only once the loop has done that much work."""
    write_home(home, sensors=sensors, every=every)
    db = home / "data" / "vigil.db"
    report = SoakReport()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    with (home / "logs" / "soak-run.out").open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    started = time.monotonic()
    seen: set[int] = set()
    try:

        def going() -> bool:
            elapsed = time.monotonic() - started
            if elapsed < seconds:
                return True
            done = report.samples[-1].finished_tasks if report.samples else 0
            return done < min_finished and elapsed < (max_seconds or seconds)

        while going() and proc.poll() is None:
            time.sleep(sample_s)
            children = _descendants(proc.pid)
            seen.update(children)
            counts: tuple[int, int, float] = (0, 0, 0.0)
            if not _dispatching(db):
                continue  # still starting (seconds on a loaded machine): no baseline yet
            if db.exists():
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
                try:
                    counts = conn.execute(
                        "SELECT SUM(status IN ('pending','active','blocked')), SUM(status IN"
                        " ('completed','failed','canceled')), COALESCE((CAST(strftime('%s','now') AS INTEGER)"
                        " * 1000 - MIN(CASE WHEN status = 'active' THEN started_at END)) / 1000.0, 0) FROM tasks"
                    ).fetchone()
                finally:
                    conn.close()
            report.samples.append(
                Sample(
                    at_s=round(time.monotonic() - started, 1),
                    rss_kib=_proc_value(proc.pid, "VmRSS"),
                    fds=fds_at_rest(proc.pid, children),
                    children=len(children),
                    db_bytes=_size(db),
                    wal_bytes=_size(Path(f"{db}-wal")),
                    open_tasks=int(counts[0] or 0),
                    finished_tasks=int(counts[1] or 0),
                    oldest_active_s=max(0.0, float(counts[2] or 0)),
                )
            )
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        report.exit_code = proc.wait(timeout=60)
    time.sleep(0.5)
    report.leftover_processes = [pid for pid in seen if Path(f"/proc/{pid}").exists() and _alive(pid)]
    conn = sqlite3.connect(db)
    try:
        report.left_active = conn.execute("SELECT COUNT(*) FROM tasks WHERE status = 'active'").fetchone()[0]
        report.by_status = dict(conn.execute("SELECT status, COUNT(*) FROM tasks GROUP BY status").fetchall())
        report.integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()
    return report


def _dispatching(db: Path) -> bool:
    """Whether the daemon is up: its dispatcher wrote a heartbeat."""
    if not db.exists():
        return False
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT 1 FROM loop_state WHERE key = ?", (HEARTBEAT_KEY,)).fetchone() is not None
    except sqlite3.OperationalError:
        return False  # the schema is not there yet
    finally:
        conn.close()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return False


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--sensors", type=int, default=100)
    parser.add_argument("--every", default="30s")
    parser.add_argument("--sample", type=float, default=10)
    args = parser.parse_args(argv)
    from vigil.home import init_home

    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder) / "home"
        init_home(home)
        report = soak(home, seconds=args.minutes * 60, sensors=args.sensors, every=args.every, sample_s=args.sample)
    print("   t s   RSS MiB  fds  children  DB MiB  WAL MiB  open  finished  oldest active s")
    for s in report.samples:
        print(
            f"{s.at_s:6.0f} {s.rss_kib / 1024:9.1f} {s.fds:4} {s.children:9} {s.db_bytes / 2**20:7.2f} "
            f"{s.wal_bytes / 2**20:8.2f} {s.open_tasks:5} {s.finished_tasks:9} {s.oldest_active_s:16.1f}"
        )
    print(
        f"exit {report.exit_code}; left active {report.left_active}; leftover processes "
        f"{report.leftover_processes}; by status {report.by_status}; integrity {report.integrity}"
    )
    ok = report.exit_code == 0 and not report.left_active and not report.leftover_processes
    return 0 if ok and report.integrity == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
