"""A year of daylight-saving changes through the real daemon, on the simulated clock.

For each of ``Europe/Berlin``, ``America/New_York`` and ``Australia/Sydney`` a home
holds a cron sensor for each of four expressions in that zone; each run stores a
task naming the occurrence it stands for. For each change of 2026 (two per zone) the real ``vigil
run`` runs under ``VIGIL_ACCELERATED_CLOCK`` from an hour before the change, gets
SIGTERM half an hour after it (in the repeated hour, or just past the gap), must
exit within ``STOP_WITHIN_S``, and is started again from there until an hour after
the change. The zones run at once. Afterwards each sensor must have run exactly for
the fire times docs/sensors.md promises (``expected_fires``): every matching wall
time once, and a schedule for every hour through both passes of the repeated hour::

    python -m tests.reliability.dst          # about a minute: each change, and what ran

The same fire times check the schedule arithmetic alone, around every change of the
year, in tests/sensors/test_daylight_saving.py.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

ZONES = ("Europe/Berlin", "America/New_York", "Australia/Sydney")
# every 15 minutes (the freeze of the autumn hour), a fixed minute of a fixed hour,
# every hour, and every 20 minutes within a fixed hour
EXPRESSIONS = ("*/15 * * * *", "30 2 * * *", "0 * * * *", "*/20 2 * * *")
YEAR = 2026
FACTOR = 600  # simulated seconds per real second: 15 simulated minutes in 1.5 s
LEAD_MS = 60 * 60_000  # a daemon starts this much simulated time early: its start-up takes 1-4 real s
STOP_WITHIN_S = 10.0
HOUR_MS = 3_600_000
REPO = Path(__file__).resolve().parents[2]


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def transitions(zone: str, year: int = YEAR) -> list[int]:
    """The instants (epoch ms) at which ``zone`` changes its UTC offset in ``year``."""
    tz = ZoneInfo(zone)
    found = []
    moment = datetime(year, 1, 1, tzinfo=UTC)
    while moment.year == year:
        following = moment + timedelta(hours=1)
        if moment.astimezone(tz).utcoffset() != following.astimezone(tz).utcoffset():
            # the change is at a full or half hour: find its minute
            at = moment
            while at.astimezone(tz).utcoffset() == moment.astimezone(tz).utcoffset():
                at += timedelta(minutes=30)
            found.append(_ms(at))
        moment = following
    return found


def _matches(field: str, value: int) -> bool:
    """``*``, ``*/n``, ``a``, ``a-b`` and lists of them (enough for ``EXPRESSIONS``)."""
    for part in field.split(","):
        base, _, step = part.partition("/")
        low, _, high = base.partition("-")
        if base == "*":
            if value % int(step or 1) == 0:
                return True
        elif int(low) <= value <= int(high or low):
            return True
    return False


def expected_fires(expression: str, zone: str, start_ms: int, end_ms: int) -> list[int]:
    """When a cron sensor fires in ``[start_ms, end_ms)``, as docs/sensors.md says:
    each matching wall time once, at its first moment (the first pass of the repeated
    hour; a time in the spring gap as long after the jump as it was after the gap's
    start), and a schedule for every hour (``*`` in the hour field) also on the
    second pass of the repeated hour. Read from zoneinfo, without the scheduler."""
    minute, hour, day, month, weekday = expression.split()
    tz = ZoneInfo(zone)
    local = datetime.fromtimestamp(start_ms / 1000, tz=tz).replace(tzinfo=None, second=0, microsecond=0)
    stop = datetime.fromtimestamp(end_ms / 1000, tz=tz).replace(tzinfo=None) + timedelta(hours=3)
    local -= timedelta(hours=3)
    fires: set[int] = set()
    while local <= stop:
        if (
            _matches(minute, local.minute)
            and _matches(hour, local.hour)
            and _matches(day, local.day)
            and _matches(month, local.month)
            and _matches(weekday, local.isoweekday() % 7)
        ):
            for fold in (0, 1) if hour == "*" else (0,):
                at = _ms(local.replace(tzinfo=tz, fold=fold))
                if start_ms <= at < end_ms:
                    fires.add(at)
        local += timedelta(minutes=1)
    return sorted(fires)


RECORDER = """\
\"\"\"Each run becomes a task named for the occurrence it stands for and when it ran.\"\"\"

from sensors import FoundTask, SensorContext
from vigil.models import DedupScope


async def record(ctx: SensorContext) -> list[FoundTask]:
    now = ctx.clock.now_ms()
    turn = ctx.schedule.occurrence_at_or_before(now)
    return [FoundTask(key=f"{turn}@{now}", subject=f"{ctx.name} ran for {turn}", dedup=DedupScope.EVER)]
"""


def sensor_name(expression: str) -> str:
    return f"cron-{EXPRESSIONS.index(expression)}"


def write_home(home: Path, zone: str) -> None:
    """A new home with a sensor for each of ``EXPRESSIONS`` in ``zone``, whose runs
    each store a task (the dry-run executor runs them: nothing here waits on it)."""
    from vigil.home import init_home

    init_home(home)
    (home / "record.py").write_text(RECORDER, encoding="utf-8")
    entries = "".join(
        f'\n[[sensors]]\nuse = "record.py:record"\nname = "{sensor_name(e)}"\ncron = "{e}"\ntimezone = "{zone}"\n'
        for e in EXPRESSIONS
    )
    config = home / "vigil.toml"
    config.write_text(config.read_text(encoding="utf-8") + entries, encoding="utf-8")


def _environment(start_ms: int) -> dict[str, str]:
    """The daemon's environment: its simulated clock reads ``start_ms`` now."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    now = time.time_ns() // 1_000_000
    anchor = (FACTOR * now - start_ms) // (FACTOR - 1)  # anchor + FACTOR × (now − anchor) = start
    env["VIGIL_ACCELERATED_CLOCK"] = f"{FACTOR}@{anchor}"
    return env


@dataclass(frozen=True)
class Leg:
    """One run of ``vigil run`` on simulated time, stopped at ``stop_ms``."""

    stop_ms: int
    exit_code: int | None  # None: it did not stop within STOP_WITHIN_S of the SIGTERM
    stopped_in_s: float
    stderr: str


def run_leg(home: Path, start_ms: int, stop_ms: int) -> Leg:
    """``vigil run`` on simulated time, started ``LEAD_MS`` before ``start_ms`` (so that
    it runs by then) and sent SIGTERM when its clock reads ``stop_ms``; waits up to
    ``STOP_WITHIN_S`` for it to exit (then kills it)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vigil", "--home", str(home), "run"],
        env=_environment(start_ms - LEAD_MS),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    time.sleep((stop_ms - start_ms + LEAD_MS) / 1000 / FACTOR)
    proc.send_signal(signal.SIGTERM)
    asked = time.monotonic()
    try:
        _, stderr = proc.communicate(timeout=STOP_WITHIN_S)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        code = None
    return Leg(stop_ms, code, time.monotonic() - asked, stderr)


def fired(home: Path, since_ms: int, until_ms: int) -> dict[str, list[int]]:
    """Sensor name → the occurrences it ran for in ``[since, until)``, once per run
    that was stored (a run that SIGTERM cut off is made again after the restart)."""
    conn = sqlite3.connect(f"file:{home / 'data' / 'vigil.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT source, source_key FROM tasks WHERE source LIKE 'sensor:%'").fetchall()
    finally:
        conn.close()
    found: dict[str, list[int]] = {}
    for source, key in rows:
        turn = int(key.partition(":")[2].partition("@")[0])
        if since_ms <= turn < until_ms:
            found.setdefault(source.removeprefix("sensor:"), []).append(turn)
    return {name: sorted(times) for name, times in found.items()}


@dataclass(frozen=True)
class Change:
    zone: str
    at_ms: int
    legs: tuple[Leg, ...]
    problems: tuple[str, ...]


def run_change(home: Path, zone: str, at_ms: int) -> Change:
    """Through one change of ``zone``'s offset, from an hour before it to an hour
    after, stopped with SIGTERM half an hour after it (in the repeated hour, or just
    after the gap) and started again from there."""
    start, middle, end = at_ms - HOUR_MS, at_ms + HOUR_MS // 2, at_ms + HOUR_MS
    legs = (run_leg(home, start, middle), run_leg(home, middle, end))
    problems = [
        f"leg to {_iso(leg.stop_ms)}: "
        + ("did not stop" if leg.exit_code is None else f"exit {leg.exit_code}")
        + f" {leg.stopped_in_s:.1f}s after SIGTERM: {leg.stderr.strip()[-300:]}"
        for leg in legs
        if leg.exit_code != 0
    ]
    made = fired(home, start, end)
    for expression in EXPRESSIONS:
        name = sensor_name(expression)
        want = expected_fires(expression, zone, start, end)
        got = made.get(name, [])
        if got != want:
            problems.append(f"{name} ({expression}): ran for {_isos(got)}, expected {_isos(want)}")
    return Change(zone, at_ms, legs, tuple(problems))


def run_zone(folder: Path, zone: str) -> list[Change]:
    """Every change of ``YEAR`` in ``zone``, in order, on one home (the daemon is
    down between them, as over a quiet half year)."""
    home = folder / zone.replace("/", "-")
    write_home(home, zone)
    return [run_change(home, zone, at) for at in transitions(zone)]


def run_year(folder: Path) -> list[Change]:
    """``run_zone`` for each of ``ZONES``, the three at once."""
    with ThreadPoolExecutor(len(ZONES)) as pool:
        return [change for changes in pool.map(lambda zone: run_zone(folder, zone), ZONES) for change in changes]


def _iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%m-%d %H:%MZ")


def _isos(times: list[int]) -> str:
    return "[" + ", ".join(_iso(t) for t in times) + "]"


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        changes = run_year(Path(folder))
    for change in changes:
        stops = ", ".join(f"{leg.stopped_in_s:.1f}s" for leg in change.legs)
        print(f"{'ok  ' if not change.problems else 'FAIL'} {change.zone:18} {_iso(change.at_ms)}  stopped in {stops}")
        for problem in change.problems:
            print(f"        {problem}")
    failed = sum(bool(change.problems) for change in changes)
    print(f"{len(changes)} changes, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
