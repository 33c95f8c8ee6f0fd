"""When a sensor runs: its schedule (``every`` or ``cron``) and its back-off.

All times are epoch ms. A cron schedule's occurrences are computed by APScheduler's
``CronTrigger`` (the schedule holds one, built by ``sensors.runner.parse_schedule``:
only that module imports APScheduler); an ``every`` schedule is plain arithmetic.
The next due time is computed from the *persisted* last run and the count of
consecutive failures, so a restarted process does not fire every sensor at once.

Back-off: after the n-th consecutive failure, an ``every`` sensor waits
``min(every × 2ⁿ, max(every, max_backoff))``; a ``cron`` sensor skips to the first
occurrence after ``min(gap × (2ⁿ − 1), max_backoff)`` (``gap``: the time between its
next two occurrences). One success resets it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Protocol

from vigil.durations import parse_duration_ms
from vigil.errors import InputError
from vigil.models import SensorState

MAX_DOUBLINGS = 30  # 2**30 × any interval is past every sane cap; avoids huge ints
MAX_COUNTED = 200  # missed cron runs counted one by one, at most (some ms)
_MIN_MS = 60_000


class Trigger(Protocol):
    """The part of an APScheduler trigger a schedule asks: the first fire time at or
    after ``now`` (aware datetimes; None: never again)."""

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None: ...


@dataclass(frozen=True)
class Schedule:
    """Exactly one of ``every_ms`` (a fixed interval) or ``cron`` (the expression as
    written, read in ``tz``, with the ``trigger`` that computes it) is set."""

    every_ms: int | None = None
    cron: str | None = None
    tz: tzinfo = UTC
    trigger: Trigger | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron}"
        return f"every {short_duration(self.every_ms or 0)}"

    def next_after(self, epoch_ms: int) -> int:
        """The first occurrence strictly after ``epoch_ms``: a cron's next matching
        minute, or ``epoch_ms + every``."""
        if self.trigger is None:
            return epoch_ms + (self.every_ms or 0)
        fire = self.trigger.get_next_fire_time(None, _datetime(epoch_ms + 1))
        if fire is None:
            raise ValueError(f"cron {self.cron!r} never matches again")
        return int(fire.timestamp() * 1000)

    def gap_ms(self, after_ms: int) -> int:
        """The nominal interval: ``every``, or the gap between the next two occurrences."""
        if self.every_ms is not None:
            return self.every_ms
        first = self.next_after(after_ms)
        return self.next_after(first) - first

    def occurrence_at_or_before(self, now_ms: int) -> int:
        """The latest occurrence ≤ ``now_ms``. ``every`` occurrences are aligned to
        multiples of the interval since the Unix epoch (``1h``: each full UTC hour).
        A cron trigger only looks forward, so this looks back twice as far each time
        until an occurrence is in reach, then walks forward to the last one."""
        if self.every_ms is not None:
            return now_ms - now_ms % self.every_ms
        reach = _MIN_MS
        while (first := self.next_after(now_ms - reach)) > now_ms:
            reach *= 2
        while (following := self.next_after(first)) <= now_ms:
            first = following
        return first

    def runs_between(self, first_ms: int, last_ms: int) -> int:
        """How many occurrences fall in ``[first_ms, last_ms]``, where ``first_ms`` is
        one; a cron's are counted one by one up to ``MAX_COUNTED``."""
        if last_ms < first_ms:
            return 0
        if self.every_ms is not None:
            return (last_ms - first_ms) // self.every_ms + 1
        count, at = 1, first_ms
        while count < MAX_COUNTED and (at := self.next_after(at)) <= last_ms:
            count += 1
        return count


def _datetime(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


def short_duration(ms: int) -> str:
    """``90000`` → ``1m30s``: the exact duration in the units vigil.toml uses."""
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, ms = divmod(ms, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def parse_every(every: str) -> Schedule:
    """An ``every`` schedule; raises ``ValueError`` naming the key."""
    try:
        every_ms = parse_duration_ms(every)
    except InputError as err:
        raise ValueError(f"every: {err}") from None
    if every_ms <= 0:
        raise ValueError("every: must be longer than 0")
    return Schedule(every_ms=every_ms)


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
        return schedule.next_after(base + backoff_ms(schedule, failures, max_backoff_ms, base))
    if last_run_ms is None:
        return now_ms
    return last_run_ms + backoff_ms(schedule, failures, max_backoff_ms, last_run_ms)


def due_at(schedule: Schedule, state: SensorState | None, max_backoff_ms: int, since_ms: int) -> int:
    """When a sensor is next due: from its persisted last run and failures, or the
    persisted next due time when that is earlier (its job's next fire time, which a
    run records). One that never ran is due at ``since_ms`` (when its runner
    started; ``every``) or at its first occurrence after that (``cron``)."""
    if state is None or state.last_run_at is None:
        return next_due(schedule, None, 0, max_backoff_ms, since_ms)
    due = next_due(schedule, state.last_run_at, state.consecutive_failures, max_backoff_ms, since_ms)
    return due if state.next_due_at is None else min(due, state.next_due_at)
