"""When a sensor runs: its schedule (``every`` or ``cron``) and its back-off.

All times are epoch ms. The next due time is computed from the *persisted* last run
and the count of consecutive failures, so a restarted process does not fire every
sensor at once, and a change of schedule in vigil.toml takes effect immediately.

Back-off: after the n-th consecutive failure, an ``every`` sensor waits
``min(every × 2ⁿ, max(every, max_backoff))``; a ``cron`` sensor skips to the first
occurrence after ``min(gap × (2ⁿ − 1), max_backoff)`` (``gap``: the time between its
next two occurrences). One success resets it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sensors.cron import Cron, CronError, parse_cron
from vigil.durations import parse_duration_ms
from vigil.errors import InputError

MAX_DOUBLINGS = 30  # 2**30 × any interval is past every sane cap; avoids huge ints


@dataclass(frozen=True)
class Schedule:
    """Exactly one of ``every_ms`` (a fixed interval) or ``cron`` is set."""

    every_ms: int | None = None
    cron: Cron | None = None

    def __str__(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron.text}"
        return f"every {short_duration(self.every_ms or 0)}"

    def gap_ms(self, after_ms: int) -> int:
        """The nominal interval: ``every``, or the gap between the next two occurrences."""
        if self.every_ms is not None:
            return self.every_ms
        assert self.cron is not None
        first = self.cron.next_after(after_ms)
        return self.cron.next_after(first) - first

    def occurrence_at_or_before(self, now_ms: int) -> int:
        """The latest occurrence ≤ ``now_ms``. ``every`` occurrences are aligned to
        multiples of the interval since the Unix epoch (``1h``: each full UTC hour)."""
        if self.every_ms is not None:
            return now_ms - now_ms % self.every_ms
        assert self.cron is not None
        return self.cron.at_or_before(now_ms)


def short_duration(ms: int) -> str:
    """``90000`` → ``1m30s``: the exact duration in the units vigil.toml uses."""
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, ms = divmod(ms, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def parse_schedule(every: str | None, cron: str | None, timezone: str | None = None) -> Schedule:
    """Build a schedule from the text of ``every`` or ``cron``; raises ``ValueError``
    (``InputError`` for a bad duration) with a message naming the key."""
    if every and cron:
        raise ValueError("give every or cron, not both")
    if every:
        try:
            every_ms = parse_duration_ms(every)
        except InputError as err:
            raise ValueError(f"every: {err}") from None
        if every_ms <= 0:
            raise ValueError("every: must be longer than 0")
        return Schedule(every_ms=every_ms)
    if cron:
        try:
            return Schedule(cron=parse_cron(cron, _zone(timezone)))
        except CronError as err:
            raise ValueError(f"cron {cron!r}: {err}") from None
    raise ValueError("no schedule: set every or cron")


def _zone(name: str | None) -> tzinfo:
    if name is None or name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"timezone: unknown time zone {name!r}") from None


def backoff_ms(schedule: Schedule, failures: int, max_backoff_ms: int, after_ms: int) -> int:
    """How far past ``after_ms`` the next run may start, given ``failures``."""
    gap = schedule.gap_ms(after_ms)
    doublings = min(failures, MAX_DOUBLINGS)
    factor: int = 1 << doublings
    if schedule.every_ms is not None:
        return min(gap * factor, max(gap, max_backoff_ms))
    return min(gap * (factor - 1), max_backoff_ms)


def next_due(schedule: Schedule, last_run_ms: int | None, failures: int, max_backoff_ms: int, now_ms: int) -> int:
    """When the sensor is next due. Never run: due now (an ``every`` sensor) or at its
    next occurrence (a ``cron`` sensor)."""
    if schedule.cron is not None:
        base = now_ms if last_run_ms is None else last_run_ms
        return schedule.cron.next_after(base + backoff_ms(schedule, failures, max_backoff_ms, base))
    if last_run_ms is None:
        return now_ms
    return last_run_ms + backoff_ms(schedule, failures, max_backoff_ms, last_run_ms)
