"""Concurrency load: many processes add (shared and unique keys), reprioritise,
cancel and read while ``vigil run`` dispatches (dry-run executor).

    python -m tests.reliability.concurrency --procs 50 --seconds 60

Checks afterwards: no error reached a caller (conditional writes refused because
the task moved on are expected answers, counted apart), at most one open task per
source key, no task claimed twice (one run per task: nothing here retries), no
task left active, integrity ok; and reports the write-ahead log's largest size,
sampled every 100 ms.
"""

from __future__ import annotations

import argparse
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

CONFIG = """\
[dispatch]
executor = "dry-run"
heartbeat = "1s"
shutdown_grace = "5s"
"""
SAMPLE_S = 0.1
SAFETY_S = 120.0  # a stuck process fails the run here, it never hangs it


@dataclass
class LoadReport:
    procs: int
    seconds: float
    ops: int = 0
    refused: int = 0
    added: int = 0
    errors: list[str] = field(default_factory=list)
    dispatched: int = 0
    duplicate_open_keys: list[tuple[str, int]] = field(default_factory=list)
    claimed_twice: list[int] = field(default_factory=list)
    left_active: int = 0
    wal_max_bytes: int = 0
    integrity: str = ""
    daemon_exit: int | None = None
    daemon_problems: list[str] = field(default_factory=list)

    def text(self) -> str:
        return (
            f"{self.procs} processes × {self.seconds:g} s: {self.ops} operations ({self.ops / self.seconds:.0f}/s), "
            f"{self.added} tasks added, {self.refused} conditional writes refused, {len(self.errors)} errors; "
            f"dispatched {self.dispatched}; duplicate open keys {len(self.duplicate_open_keys)}, "
            f"claimed twice {len(self.claimed_twice)}, left active {self.left_active}; "
            f"largest WAL {self.wal_max_bytes / 1024 / 1024:.1f} MiB; integrity {self.integrity}; "
            f"vigil run exit {self.daemon_exit}"
        )


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}


def _check(db: Path, report: LoadReport) -> None:
    conn = sqlite3.connect(db)
    try:
        report.duplicate_open_keys = list(
            conn.execute(
                "SELECT source_key, COUNT(*) FROM tasks WHERE source_key IS NOT NULL"
                " AND status IN ('pending', 'active', 'blocked') GROUP BY source_key HAVING COUNT(*) > 1"
            )
        )
        report.claimed_twice = [
            r[0] for r in conn.execute("SELECT task_id FROM runs GROUP BY task_id HAVING COUNT(*) > 1")
        ]
        report.left_active = conn.execute("SELECT COUNT(*) FROM tasks WHERE status = 'active'").fetchone()[0]
        report.dispatched = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        report.integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def run_load(home: Path, *, procs: int, seconds: float, seed: int = 1) -> LoadReport:
    """Run the load on ``home`` (an initialised home; its vigil.toml is replaced)."""
    (home / "vigil.toml").write_text(CONFIG, encoding="utf-8")
    db = home / "data" / "vigil.db"
    wal = Path(f"{db}-wal")
    report = LoadReport(procs=procs, seconds=seconds)
    daemon_log = home / "logs" / "load-daemon.out"
    with daemon_log.open("wb") as out:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_clean_env(),
        )
    try:
        deadline = time.monotonic() + SAFETY_S
        while not db.exists() and time.monotonic() < deadline:
            time.sleep(SAMPLE_S)
        workers = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.reliability.load_worker", str(db), str(seed * 1000 + n), str(seconds)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=_clean_env(),
                text=True,
            )
            for n in range(procs)
        ]
        while any(w.poll() is None for w in workers) and time.monotonic() < deadline + seconds:
            if wal.exists():
                report.wal_max_bytes = max(report.wal_max_bytes, wal.stat().st_size)
            time.sleep(SAMPLE_S)
        for worker in workers:
            stdout, stderr = worker.communicate(timeout=SAFETY_S)
            if worker.returncode != 0 or not stdout.strip():
                report.errors.append(f"worker exited {worker.returncode}: {stderr.strip()[-500:]}")
                continue
            result = json.loads(stdout)
            report.ops += result["ops"]
            report.refused += result["refused"]
            report.added += result["added"]
            report.errors += result["errors"]
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
        try:
            report.daemon_exit = daemon.wait(timeout=SAFETY_S)
        except subprocess.TimeoutExpired:
            daemon.kill()
            report.daemon_exit = daemon.wait()
    text = daemon_log.read_text(encoding="utf-8", errors="replace")
    report.daemon_problems = [
        line for line in text.splitlines() if "Traceback" in line or "ERROR" in line or "locked" in line
    ]
    _check(db, report)
    return report


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    from vigil.home import init_home

    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder) / "home"
        init_home(home)
        report = run_load(home, procs=args.procs, seconds=args.seconds, seed=args.seed)
    print(report.text())
    for line in (report.errors + report.daemon_problems)[:20]:
        print("  ", line)
    bad = report.errors or report.duplicate_open_keys or report.claimed_twice or report.left_active
    return 1 if bad or report.integrity != "ok" or report.daemon_problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
