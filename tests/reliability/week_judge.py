"""What the simulated week's figures must show, and how they are printed.

``judge(report)`` returns one line per finding (empty: all held). Memory and sizes
are judged by comparing windows of samples, never by a single peak: a sample taken
while a run's pipes are open or a checkpoint is due sees a moment, not a trend.

``judge_leftovers(report)`` judges apart what pruned tasks leave behind
(``cost_archive`` rows, ``retired_keys``): it stops growing only when ``[retention]
keep_costs`` and ``keep_keys`` are set (docs/reliability.md, *Simulated week*).
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path

from tests.reliability.week import MAX_RUN_COST, Sample, WeekReport
from vigil.durations import parse_duration_ms

MIB = 2**20
WARM_UP = 0.25  # the first quarter of the samples: caches and the database fill
RSS_SLACK_KIB = 4 * 1024  # the later window's median RSS may exceed the earlier one's by this
FD_SLACK = 2  # descriptors the baseline may gain (a log rotation, a lazily opened file)
MAX_CHILDREN = 2  # the fake agent and its `sleep`
WAL_BOUND_BYTES = 16 * MIB  # four times the automatic checkpoint's 1000 pages
PLATEAU_SLACK = 0.15  # after retention settled, later sizes may exceed earlier ones by this share
PLATEAU_SLACK_BYTES = 256 * 1024
PRUNE_LAG_H = 2.0  # simulated: a finished task may outlive keep_finished by the hourly prune round and one more
USD_EPS = 1e-6
STALE_ALERTS = ("dispatcher_stale", "sensor_stale")  # the watchdog saw a part fall behind


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def _settled(samples: Sequence[Sample]) -> tuple[list[Sample], list[Sample]]:
    """The samples after the warm-up, split into an earlier and a later half."""
    rest = list(samples[int(len(samples) * WARM_UP) :])
    half = len(rest) // 2
    return rest[:half], rest[half:]


def _retention_settled(report: WeekReport) -> tuple[list[Sample], list[Sample]]:
    """Samples once retention had a full window to work (twice ``keep_finished``),
    split into halves; empty without retention or when the run was too short."""
    keep = report.plan.keep_finished
    if keep is None:
        return [], []
    after_h = 2 * parse_duration_ms(keep) / 3_600_000
    rest = [s for s in report.samples if s.sim_h >= after_h]
    half = len(rest) // 2
    return rest[:half], rest[half:]


def judge(report: WeekReport) -> list[str]:
    found = list(report.problems)
    if report.exit_code != 0:
        found.append(f"vigil run exited {report.exit_code}")
    if report.left_active:
        found.append(f"{report.left_active} task(s) left active after the stop")
    if report.leftover_processes:
        found.append(f"processes of the run left behind: {report.leftover_processes}")
    if report.integrity != "ok":
        found.append(f"integrity check: {report.integrity}")
    for kind in STALE_ALERTS:
        if report.alerts.get(kind):
            found.append(f"{report.alerts[kind]} {kind} alert(s) in the log")
    found += _costs(report)
    found += _resources(report)
    found += _plateau(report)
    return found


def _costs(report: WeekReport) -> list[str]:
    found = []
    # the last run reported before the cost window may have been recorded inside it:
    # the roll-up is the ledger, with or without that one run, dollars and tokens alike
    straddle = (report.straddle_usd, *report.straddle_tokens)
    ledger = (report.ledger_usd, *report.ledger_tokens)
    rolled = (report.rollup_usd, *report.rollup_tokens)
    if not any(_same(rolled, tuple(a + b * n for a, b in zip(ledger, straddle, strict=True))) for n in (0, 1)):
        if abs(report.ledger_usd - report.rollup_usd) > USD_EPS:
            found.append(f"cost roll-up ${report.rollup_usd:.6f} but the agent reported ${report.ledger_usd:.6f}")
        if report.ledger_tokens != report.rollup_tokens:
            found.append(f"token roll-up {report.rollup_tokens} but the agent reported {report.ledger_tokens}")
    for s in report.samples:
        # read between two readings of the ledger; one run may be reported but not yet recorded
        if not s.ledger_low_usd - MAX_RUN_COST - USD_EPS <= s.rollup_usd <= s.ledger_high_usd + USD_EPS:
            found.append(
                f"{s.sim_h} h: roll-up ${s.rollup_usd:.6f} outside the ledger's "
                f"${s.ledger_low_usd:.6f}-${s.ledger_high_usd:.6f} (pruned {s.pruned_tasks})"
            )
    return found


def _same(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return abs(a[0] - b[0]) <= USD_EPS and a[1:] == b[1:]


def _resources(report: WeekReport) -> list[str]:
    found = []
    samples = report.samples
    if len(samples) < 4:
        return [f"only {len(samples)} samples: too short to judge"]
    earlier, later = _settled(samples)
    grown = _median([s.rss_kib for s in later]) - _median([s.rss_kib for s in earlier])
    if grown > RSS_SLACK_KIB:
        found.append(f"RSS grew {grown / 1024:.1f} MiB between the settled windows (median to median)")
    third = max(1, len(samples) // 3)
    first, last = min(s.fds for s in samples[:third]), min(s.fds for s in samples[-third:])
    if last > first + FD_SLACK:
        found.append(f"open descriptors rose from a baseline of {first} to {last}")
    busiest = max(s.children for s in samples)
    if busiest > MAX_CHILDREN:
        found.append(f"{busiest} child processes at once (at most {MAX_CHILDREN} expected)")
    wal = max(s.wal_bytes for s in samples)
    if wal > WAL_BOUND_BYTES:
        found.append(f"the WAL reached {wal / MIB:.1f} MiB (bound {WAL_BOUND_BYTES / MIB:.0f} MiB)")
    return found


def _plateau(report: WeekReport) -> list[str]:
    earlier, later = _retention_settled(report)
    if not earlier or not later:
        return []
    found = []
    for name, unit in (("history_bytes", "database"), ("transcript_bytes", "transcripts")):
        before = max(_value(s, name) for s in earlier)
        after = max(_value(s, name) for s in later)
        if after > before * (1 + PLATEAU_SLACK) + PLATEAU_SLACK_BYTES:
            found.append(f"{unit} did not plateau under retention: {before} then {after} ({name})")
    # More tasks kept later is a leak only if retention fell behind: the count also
    # follows how many tasks the loop finishes an hour, which a loaded machine
    # lowers, then raises as it catches up. The age of the oldest one kept does not.
    kept = [[s.finished_tasks for s in half] for half in (earlier, later)]
    oldest_h = max(s.oldest_kept_h for s in later)
    if _count_rose(*kept) and oldest_h > _keep_h(report) + PRUNE_LAG_H:
        found.append(
            f"kept did not plateau under retention: at most {max(kept[0])} earlier, then a median of "
            f"{statistics.median(kept[1]):.0f} (finished_tasks), the oldest finished {oldest_h:g} h before"
        )
    if later[-1].pruned_tasks == 0:
        found.append("retention pruned nothing")
    return found


def _keep_h(report: WeekReport) -> float:
    """``[retention] keep_finished`` in hours (infinite: kept forever)."""
    return _hours(report.plan.keep_finished)


def _hours(duration: str | None) -> float:
    """A retention setting in hours; None (kept forever) is infinite."""
    return float("inf") if duration is None else parse_duration_ms(duration) / 3_600_000


def _count_rose(earlier: Sequence[int], later: Sequence[int]) -> bool:
    """Whether a count that swings with the work's cadence grew: the typical later
    level above the highest earlier one.

    Sizes of files only grow between vacuums, so their highest values compare well;
    counts rise and fall with every burst of tasks and every prune round, on cycles
    of hours (in a simulated day: 2 h bursts, hourly prunes, rows expiring on
    keep_costs and keep_keys), and halves of the window hold different phases of
    them. Their highest values, medians and a fitted line then differ by a sixth to
    a third with nothing growing; a leak lifts the later median over every earlier
    value within a day."""
    return statistics.median(later) > max(earlier)


def _value(s: Sample, name: str) -> int:
    """A sample's field; ``history_bytes`` is the database file without the pages of
    what pruned tasks leave behind (judged apart, by ``judge_leftovers``)."""
    if name == "history_bytes":
        return s.db_bytes - s.archive_bytes
    return int(getattr(s, name))


def judge_leftovers(report: WeekReport) -> list[str]:
    """Whether the archive rows and retired keys of pruned tasks stop growing once
    retention has settled, like the history does."""
    earlier, later = _retention_settled(report)
    if len(earlier) < 2 or not later:
        return []
    before = [s.archive_rows + s.retired_keys for s in earlier]
    after = [s.archive_rows + s.retired_keys for s in later]
    # As for the tasks kept: more rows later is a leak only if they outlive their
    # retention (the count follows how many tasks were pruned an hour).
    keep = max(_hours(report.plan.keep_costs), _hours(report.plan.keep_keys))
    if not _count_rose(before, after) or max(s.oldest_leftover_h for s in later) <= keep + PRUNE_LAG_H:
        return []
    first, last = earlier[0], later[-1]
    days = (last.sim_h - first.sim_h) / 24
    rows = (last.archive_rows - first.archive_rows) / days
    keys = (last.retired_keys - first.retired_keys) / days
    size = (last.archive_bytes - first.archive_bytes) / days / 1024
    return [
        f"what pruned tasks leave behind keeps growing: {rows:.0f} cost_archive rows and {keys:.0f} retired "
        f"keys per simulated day (~{size:.0f} KiB/day); at most {max(before)} rows in all earlier, "
        f"then a median of {statistics.median(after):.0f}"
    ]


def markdown(samples: Sequence[Sample], every_h: float) -> str:
    """A table with one row per ``every_h`` simulated hours (and the last sample)."""
    head = (
        "| simulated h | real s | RSS (MiB) | fds | children | DB (MiB) | WAL (MiB) | transcripts (MiB) "
        "| open | finished kept | pruned | archive rows | retired keys | roll-up = ledger |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    next_h = 0.0
    for i, s in enumerate(samples):
        if s.sim_h + 1e-9 < next_h and i != len(samples) - 1:
            continue
        next_h = s.sim_h - s.sim_h % every_h + every_h
        same = s.ledger_low_usd - MAX_RUN_COST - USD_EPS <= s.rollup_usd <= s.ledger_high_usd + USD_EPS
        rows.append(
            f"| {s.sim_h:.0f} | {s.real_s:.0f} | {s.rss_kib / 1024:.1f} | {s.fds} | {s.children} "
            f"| {s.db_bytes / MIB:.2f} | {s.wal_bytes / MIB:.2f} | {s.transcript_bytes / MIB:.2f} "
            f"| {s.open_tasks} | {s.finished_tasks} | {s.pruned_tasks} | {s.archive_rows} | {s.retired_keys} "
            f"| {'yes' if same else 'NO'} |"
        )
    return head + "\n".join(rows) + "\n"


def write_csv(samples: Sequence[Sample], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=[field.name for field in fields(Sample)])
        writer.writeheader()
        for s in samples:
            writer.writerow(asdict(s))
