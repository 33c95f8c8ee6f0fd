"""Durations (``90s``, ``30m``, ``2h``, ``1d``, ``1h30m``) and points in time
(ISO 8601, or a duration from now), parsed into milliseconds.

Every time Vigil accepts is bounded, wherever it comes from (the CLI, a sensor, the
agent, vigil.toml): a duration is at most ``MAX_DURATION_MS`` (36500 days, about a
hundred years), a point in time lies from 1970-01-01 to 9999-12-31 UTC
(``MIN_TIME_MS`` … ``MAX_TIME_MS``, what a ``datetime`` can show). Anything beyond
would overflow the database's 64-bit integers or every later attempt to show the
time, so it is refused with one line (docs/configuration.md, *Times and durations*).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from vigil.errors import InputError

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_WHOLE = re.compile(r"(?:\d+(?:ms|s|m|h|d|w))+")

MAX_DURATION_DAYS = 36_500
MAX_DURATION_MS = MAX_DURATION_DAYS * _UNIT_MS["d"]
MIN_TIME_MS = 0  # 1970-01-01T00:00:00Z
MAX_TIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
TIME_RANGE = "1970-01-01 to 9999-12-31 UTC"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _quoted(text: str) -> str:
    """``text`` for an error message: quoted, and cut when long (one line stays short)."""
    return repr(text if len(text) <= 60 else text[:59] + "…")


def time_problem(epoch_ms: object) -> str | None:
    """Why ``epoch_ms`` cannot be a stored time (not an integer, or outside
    ``TIME_RANGE``); None when it can."""
    if isinstance(epoch_ms, bool) or not isinstance(epoch_ms, int):
        return "must be an integer (epoch milliseconds)"
    if not MIN_TIME_MS <= epoch_ms <= MAX_TIME_MS:
        return f"must lie from {TIME_RANGE} (epoch ms {MIN_TIME_MS} to {MAX_TIME_MS})"
    return None


def check_time_ms(epoch_ms: int, what: str) -> int:
    """``epoch_ms`` if it is a time Vigil can store and show; else ``InputError``
    naming ``what`` (``--at``, ``the retry time`` …)."""
    problem = time_problem(epoch_ms)
    if problem is not None:
        raise InputError(f"{what} {problem}")
    return epoch_ms


def is_duration(text: str) -> bool:
    """Whether ``text`` is written as a duration (whatever its size)."""
    return bool(_WHOLE.fullmatch(text.strip().lower()))


def parse_duration_ms(text: str) -> int:
    """``"90s"`` → 90000. Units: ms, s, m, h, d, w; parts may be combined (``1h30m``).

    Raises ``InputError`` for anything else, including a bare number (the unit is
    never guessed).
    """
    cleaned = text.strip().lower()
    if not _WHOLE.fullmatch(cleaned):
        raise InputError(f"invalid duration {_quoted(text)}: expected e.g. 90s, 30m, 2h, 1d")
    parts = _PART.findall(cleaned)
    # a number of more digits than any duration in range has is refused unread
    # (Python will not even turn 4,300 digits into an int)
    if any(len(n.lstrip("0")) > 18 for n, _ in parts) or (
        sum(int(n) * _UNIT_MS[unit] for n, unit in parts) > MAX_DURATION_MS
    ):
        raise InputError(f"invalid duration {_quoted(text)}: at most {MAX_DURATION_DAYS}d (about a hundred years)")
    return sum(int(n) * _UNIT_MS[unit] for n, unit in parts)


def parse_iso_ms(text: str) -> int:
    """ISO 8601 date or date-time → epoch ms. A time without a zone is UTC; it must
    lie in ``TIME_RANGE``."""
    epoch_ms = _iso_ms(text)
    if epoch_ms is None:
        raise InputError(f"invalid time {_quoted(text)}: expected ISO 8601, e.g. 2026-12-01T09:00:00Z")
    return _in_range(text, epoch_ms)


def _iso_ms(text: str) -> int | None:
    """Epoch ms of an ISO 8601 text (no zone: UTC); None when it is not one."""
    try:
        moment = datetime.fromisoformat(text.strip())
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        # exact: a float of the seconds would lose the milliseconds of far-off years
        return (moment - _EPOCH) // timedelta(milliseconds=1)
    except (ValueError, OverflowError):
        return None


def _in_range(text: str, epoch_ms: int) -> int:
    if time_problem(epoch_ms) is not None:
        raise InputError(f"invalid time {_quoted(text)}: it must lie from {TIME_RANGE}")
    return epoch_ms


WHEN_FORMS = "a duration from now (90s, 30m, 2h, 1d, 1w, 1h30m) or an ISO 8601 time (2026-12-01T09:00Z)"


def parse_when_ms(text: str, now_ms: int) -> int:
    """A point in time: ISO 8601, or a duration meaning "that long from now".
    The error names both forms (``WHEN_FORMS``)."""
    if is_duration(text):
        return _in_range(text, now_ms + parse_duration_ms(text))
    epoch_ms = _iso_ms(text)
    if epoch_ms is None:
        raise InputError(f"invalid time {_quoted(text)}: expected {WHEN_FORMS}")
    return _in_range(text, epoch_ms)


def format_duration(ms: int) -> str:
    """Short text for people: ``45s``, ``12m``, ``3h05m``, ``2d04h``."""
    seconds = max(0, ms) // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
