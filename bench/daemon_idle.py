"""The daemon at rest: ``vigil run`` with 100 one-minute sensors that find nothing,
for 10 minutes (``--quick``: 30 s), sampled for CPU and RSS.

The sensors are user sensors (``path/file.py:function``) returning an empty list,
so every minute the runner schedules and runs 100 sensors and records 100 sensor
runs, while the dispatcher idles on an empty queue. What it costs at rest is the
scheduler's timers, the sensor runs and their bookkeeping, and the dispatcher's
idle probe. Targets from the benchmark issue: CPU ≤ 2 % of a core, RSS ≤ 100 MB and
flat.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import command_line, cpu_seconds, heading, machine, record, rss_mb, workload_args

SENSORS = 100
FULL_S = 600.0
QUICK_S = 30.0
SAFETY_S = 60.0
CPU_TARGET_PCT = 2.0
RSS_TARGET_MB = 100.0

SENSOR_FILE = '''"""Benchmark sensors: run every minute, find nothing."""


async def nothing(ctx):
    return []
'''


def make_home(folder: Path) -> Path:
    """A fresh home (dry-run executor) with ``SENSORS`` one-minute sensors."""
    from vigil.home import init_home

    home = folder / "home"
    init_home(home)
    (home / "bench_sensors.py").write_text(SENSOR_FILE)
    entries = "".join(
        f'\n[[sensors]]\nuse = "bench_sensors.py:nothing"\nname = "idle-{n:03d}"\nevery = "1m"\n'
        for n in range(SENSORS)
    )
    with (home / "vigil.toml").open("a") as toml:
        toml.write(entries)
    return home


def _sensor_runs(db: Path, since_ms: int = 0) -> int:
    """Sensors whose last run started at or after ``since_ms`` (epoch ms; 0: ever);
    0 while the table is not there yet."""
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            sql = "SELECT count(*) FROM sensor_state WHERE last_run_at >= ?"
            return int(conn.execute(sql, (since_ms,)).fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def run(seconds: float, folder: Path) -> tuple[str, bool]:
    from vigil.config import load_settings

    home = make_home(folder)
    db = load_settings(home).store.path
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    log_path = folder / "run.log"
    interval = seconds / 10 if seconds < FULL_S else 60.0
    samples: list[tuple[float, float, float]] = []  # (elapsed s, CPU % of a core in the interval, RSS MB)
    with log_path.open("wb") as log:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"], stdout=log, stderr=subprocess.STDOUT, env=env
        )
        try:
            deadline = time.monotonic() + SAFETY_S
            while _sensor_runs(db) < SENSORS:  # start-up and the first wave are not "at rest"
                if daemon.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"vigil run did not run its {SENSORS} sensors: see {log_path}")
                time.sleep(0.5)
            start, cpu_start = time.monotonic(), cpu_seconds(daemon.pid)
            start_ms = time.time_ns() // 1_000_000
            last_t, last_cpu = start, cpu_start
            rss_start = rss_mb(daemon.pid)
            while time.monotonic() - start < seconds:
                time.sleep(interval)
                now, cpu = time.monotonic(), cpu_seconds(daemon.pid)
                samples.append((now - start, (cpu - last_cpu) / (now - last_t) * 100, rss_mb(daemon.pid)))
                last_t, last_cpu = now, cpu
            total_cpu_pct = (last_cpu - cpu_start) / (last_t - start) * 100
            sensor_runs = _sensor_runs(db, start_ms)
        finally:
            daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(timeout=SAFETY_S)
    rss_end = samples[-1][2]
    rss_peak = max(s[2] for s in samples)
    traceback_in_log = "Traceback" in log_path.read_text(errors="replace")
    cpu_ok, rss_ok = total_cpu_pct <= CPU_TARGET_PCT, rss_peak <= RSS_TARGET_MB
    lines = [
        f"`vigil run`, {SENSORS} sensors every minute finding nothing, empty queue, dry-run executor; "
        f"measured for {seconds:.0f} s after every sensor had run once.",
        "",
        "| elapsed | CPU (% of a core, interval) | RSS |",
        "|---|---|---|",
        *[f"| {t:.0f} s | {cpu:.1f} % | {rss:.0f} MB |" for t, cpu, rss in samples],
        "",
        f"- CPU over the whole window: **{total_cpu_pct:.2f} % of a core** "
        f"(target ≤ {CPU_TARGET_PCT:g} %: {'met' if cpu_ok else 'MISSED'}).",
        f"- RSS: {rss_start:.0f} MB at the start of the window, {rss_end:.0f} MB at the end, peak {rss_peak:.0f} MB "
        f"(target ≤ {RSS_TARGET_MB:g} MB and flat: {'met' if rss_ok else 'MISSED'}; "
        f"growth {rss_end - rss_start:+.1f} MB).",
        f"- {sensor_runs} of {SENSORS} sensors ran again during the window; exit code {code} after SIGTERM; "
        f"traceback in its log: {'yes' if traceback_in_log else 'no'}.",
    ]
    return "\n".join(lines), code == 0 and not traceback_in_log


def main(argv: list[str] | None = None) -> int:
    args = workload_args(__doc__.splitlines()[0], argv)
    where = machine()
    print(f"machine: {where}")
    seconds = QUICK_S if args.quick else FULL_S
    heading(f"daemon at rest: {SENSORS} one-minute sensors, {seconds:.0f} s")
    with tempfile.TemporaryDirectory(prefix="vigil-bench-") as tmp:
        text, ok = run(seconds, Path(tmp))
    print(text)
    if args.record and not args.quick:
        done = record("daemon_idle", f"Command: `{command_line()}`. Machine: {where}.\n\n{text}")
        print("recorded in docs/performance.md" if done else "docs/performance.md has no daemon_idle markers")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
