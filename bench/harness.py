"""What every benchmark shares: interleaved rounds, medians and p99, ratios, the
machine's description, CPU time and RSS, and recording a result in the docs.

Interleaving is what keeps ratios honest on a busy machine: the contenders of a
workload run A B A B … in one process, so a burst of load from elsewhere lands on
all of them instead of on whichever happened to run at that moment. A figure is
the median over rounds of each round's mean time per operation; p99 is over every
single operation; a ratio is the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def workload_args(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options every workload module accepts: ``--quick`` (small sizes, seconds
    not minutes; figures are not meant to be read) and ``--record`` (write the
    result tables into docs/performance.md)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not a measurement")
    parser.add_argument("--record", action="store_true", help="write the results into docs/performance.md")
    return parser.parse_args(argv)


# --- statistics -------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (nearest rank; 99 → p99); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(pct / 100 * len(ordered))))
    return ordered[rank - 1]


@dataclass
class Contender:
    """One side of a comparison. ``run(n)`` does ``n`` operations and returns each
    one's latency in seconds; set-up it needs is done before, outside the timing."""

    name: str
    durability: str  # e.g. "synchronous=FULL, WAL": stated beside every figure
    run: Callable[[int], list[float]]


@dataclass
class Result:
    name: str
    durability: str
    round_means_s: list[float] = field(default_factory=list)  # mean s/op of each round
    samples_s: list[float] = field(default_factory=list)  # every op's latency, s

    @property
    def median_s(self) -> float:
        """Median over rounds of the round's mean time per operation, in seconds."""
        return median(self.round_means_s)

    @property
    def p99_s(self) -> float:
        return percentile(self.samples_s, 99)


def interleave(contenders: Sequence[Contender], *, rounds: int, ops: int, warmup: int = 1) -> list[Result]:
    """Run every contender ``ops`` operations per round, A B A B …, for ``rounds``
    rounds after ``warmup`` untimed ones; the order within a round rotates so that
    no contender always runs right after the same other one."""
    results = [Result(c.name, c.durability) for c in contenders]
    for round_no in range(warmup + rounds):
        shift = round_no % len(contenders)
        order = list(range(len(contenders)))[shift:] + list(range(len(contenders)))[:shift]
        for index in order:
            latencies = contenders[index].run(ops)
            if round_no < warmup:
                continue
            results[index].round_means_s.append(sum(latencies) / len(latencies))
            results[index].samples_s.extend(latencies)
    return results


def timed_calls(fn: Callable[[int], object], n: int) -> list[float]:
    """Call ``fn(i)`` for i in 0..n-1 and return each call's latency in seconds."""
    latencies = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        latencies.append(time.perf_counter() - start)
    return latencies


# --- formatting ---------------------------------------------------------------------


def fmt_s(seconds: float) -> str:
    """A duration with a unit that keeps three significant figures."""
    if seconds != seconds:  # NaN
        return "–"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms" if seconds < 0.1 else f"{seconds * 1e3:.0f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(ratio: float, target: str | None = None, met: bool | None = None) -> str:
    """``0.83×``, and ``(target ≥ 0.7×: met)`` when a target is given."""
    text = f"{ratio:.2f}×"
    if target is not None:
        text += f" (target {target}: {'met' if met else 'MISSED'})"
    return text


def speed_ratio(vigil: Result, other: Result) -> float:
    """How fast Vigil is relative to ``other``: other's time / Vigil's time (so
    1.0 is as fast, 0.5 is half as fast, 2.0 twice as fast).

    Paired by round: the median of the per-round ratios. Two contenders of one
    round ran seconds apart, so a burst of load from elsewhere (an fsync storm of
    another process) mostly cancels out of their ratio, where it would not out of
    two separate medians."""
    pairs = [o / v for v, o in zip(vigil.round_means_s, other.round_means_s, strict=True) if v > 0]
    return median(pairs)


def table(
    results: Sequence[Result], vigil: Result, *, unit: str = "op", targets: dict[str, float] | None = None
) -> str:
    """A Markdown table of ``results`` with Vigil's speed ratio to each other one;
    ``targets`` maps a contender name to the least ratio the issue asks for."""
    targets = targets or {}
    plural = unit + ("es" if unit.endswith(("ch", "s", "sh", "x")) else "s")
    lines = [
        f"| contender | durability | median per {unit} | p99 per {unit} | {plural}/s | Vigil ÷ other (speed) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        if r is vigil:
            ratio = "—"
        else:
            value = speed_ratio(vigil, r)
            target = targets.get(r.name)
            ratio = fmt_ratio(value) if target is None else fmt_ratio(value, f"≥ {target}×", value >= target)
        rate = f"{1 / r.median_s:,.0f}" if r.median_s > 0 else "–"
        lines.append(f"| {r.name} | {r.durability} | {fmt_s(r.median_s)} | {fmt_s(r.p99_s)} | {rate} | {ratio} |")
    return "\n".join(lines)


# --- the machine and processes --------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def filesystem_of(path: Path) -> str:
    """The filesystem type holding ``path`` (its fsync is what a durable commit waits for)."""
    best, kind = "", "unknown filesystem"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            _device, mount, fstype, *_ = line.split()
            inside = str(path) == mount or str(path).startswith(mount.rstrip("/") + "/")
            if inside and len(mount) > len(best):
                best, kind = mount, fstype
    except OSError:
        pass
    return kind


def machine() -> str:
    """One line naming what the figures were taken on, and how busy it was."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    tmp = Path(tempfile.gettempdir()).resolve()
    return (
        f"{os.cpu_count()} cores ({cpu_model()}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"databases on {filesystem_of(tmp)}; load average {load} at start"
    )


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds used so far by process ``pid`` (None: this one)."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def rss_mb(pid: int | None = None) -> float:
    """Resident set size of process ``pid`` (None: this one) in MB (10^6 bytes)."""
    statm = Path(f"/proc/{pid or 'self'}/statm").read_text().split()
    return int(statm[1]) * PAGE_BYTES / 1e6


def synchronous_of(conn: sqlite3.Connection) -> str:
    """The durability a connection really runs at, read back from SQLite."""
    level = conn.execute("PRAGMA synchronous").fetchone()[0]
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return f"synchronous={names.get(int(level), level)}, {str(mode).upper()}"


# --- output ---------------------------------------------------------------------------


def heading(title: str) -> None:
    print(f"\n=== {title} ===", flush=True)


def command_line() -> str:
    """How this run was started, for the record (``python -m bench.<name> …``)."""
    module = Path(sys.argv[0]).stem
    return " ".join(["python -m", f"bench.{module}", *sys.argv[1:]]).replace(" --record", "")


def record(name: str, markdown: str, doc: Path = DOC) -> bool:
    """Replace the text between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``
    in the performance page with ``markdown``. Text outside the markers (the
    readings people wrote) is kept. False when the markers are missing."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    try:
        text = doc.read_text()
    except FileNotFoundError:
        return False
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        return False
    replacement = f"{begin}\n{markdown.strip()}\n{end}"
    doc.write_text(pattern.sub(lambda _m: replacement, text, count=1))
    return True
