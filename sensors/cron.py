"""Five-field cron expressions (``minute hour day-of-month month day-of-week``).

Supports ``*``, lists ``a,b``, ranges ``a-b``, steps ``*/n`` and ``a-b/n``, month
and weekday names (``jan``, ``mon``), weekday 0 or 7 = Sunday, and the macros
``@hourly @daily @weekly @monthly @yearly``. As in classic cron, when both
day-of-month and day-of-week are restricted a day matching either one matches.
Times are computed on the wall clock of a time zone (UTC unless one is given).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES, start=1)}
_DAYS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
# (name, low, high, names)
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
_SEARCH_DAYS = 366 * 5  # Feb 29 on a Monday recurs within 28 years; 5 covers any sane spec


class CronError(ValueError):
    """The expression is not valid cron; the message says which field."""


def _value(text: str, low: int, high: int, names: dict[str, int], field: str) -> int:
    value = names.get(text.lower())
    if value is None:
        if not text.isdigit():
            raise CronError(f"{field}: {text!r} is not a number")
        value = int(text)
    if not low <= value <= high:
        raise CronError(f"{field}: {value} is outside {low}-{high}")
    return value


def _field(text: str, low: int, high: int, names: dict[str, int], field: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{field}: step {step_text!r} must be a positive number")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            start, end = _value(a, low, high, names, field), _value(b, low, high, names, field)
            if start > end:
                raise CronError(f"{field}: range {base!r} is backwards")
        else:
            start = _value(base, low, high, names, field)
            end = high if step_text else start
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    """A parsed expression; ``text`` is what the user wrote."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month is '*'
    any_weekday: bool  # day of week is '*'
    tz: tzinfo = UTC

    def _day_matches(self, moment: datetime) -> bool:
        if moment.month not in self.months:
            return False
        dom = moment.day in self.days
        dow = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow

    def next_after(self, epoch_ms: int) -> int:
        """The first matching minute strictly after ``epoch_ms`` (epoch ms)."""
        local = datetime.fromtimestamp(epoch_ms / 1000, tz=self.tz).replace(second=0, microsecond=0, tzinfo=None)
        moment = local + timedelta(minutes=1)
        for _ in range(_SEARCH_DAYS):
            if self._day_matches(moment):
                for hour in sorted(h for h in self.hours if h >= moment.hour):
                    start = moment.minute if hour == moment.hour else 0
                    minute = next((m for m in sorted(self.minutes) if m >= start), None)
                    if minute is not None:
                        return _to_ms(moment.replace(hour=hour, minute=minute), self.tz)
            moment = (moment + timedelta(days=1)).replace(hour=0, minute=0)
        raise CronError(f"{self.text!r} never matches")

    def at_or_before(self, epoch_ms: int) -> int:
        """The last matching minute at or before ``epoch_ms`` (epoch ms)."""
        moment = datetime.fromtimestamp(epoch_ms / 1000, tz=self.tz).replace(second=0, microsecond=0, tzinfo=None)
        for _ in range(_SEARCH_DAYS):
            if self._day_matches(moment):
                for hour in sorted((h for h in self.hours if h <= moment.hour), reverse=True):
                    end = moment.minute if hour == moment.hour else 59
                    minute = next((m for m in sorted(self.minutes, reverse=True) if m <= end), None)
                    if minute is not None:
                        return _to_ms(moment.replace(hour=hour, minute=minute), self.tz)
            moment = (moment - timedelta(days=1)).replace(hour=23, minute=59)
        raise CronError(f"{self.text!r} never matches")


def _to_ms(local: datetime, tz: tzinfo) -> int:
    return int(local.replace(tzinfo=tz).timestamp() * 1000)


def parse_cron(text: str, tz: tzinfo = UTC) -> Cron:
    """Parse ``text``; raises ``CronError`` naming the bad field."""
    expanded = _MACROS.get(text.strip().lower(), text)
    parts = expanded.split()
    if len(parts) != 5:
        raise CronError(f"expected 5 fields (minute hour day month weekday), got {len(parts)}")
    sets = [_field(p, low, high, names, name) for p, (name, low, high, names) in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in sets[4])
    return Cron(text, sets[0], sets[1], sets[2], sets[3], weekdays, parts[2] == "*", parts[4] == "*", tz)
