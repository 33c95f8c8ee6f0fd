"""Durations (``90s``, ``30m``, ``2h``, ``1d``, ``1h30m``) and points in time
(ISO 8601, or a duration from now), parsed into milliseconds."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from vigil.errors import InputError

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_WHOLE = re.compile(r"(?:\d+(?:ms|s|m|h|d|w))+")


def parse_duration_ms(text: str) -> int:
    """``"90s"`` → 90000. Units: ms, s, m, h, d, w; parts may be combined (``1h30m``).

    Raises ``InputError`` for anything else, including a bare number (the unit is
    never guessed).
    """
    cleaned = text.strip().lower()
    if not _WHOLE.fullmatch(cleaned):
        raise InputError(f"invalid duration {text!r}: expected e.g. 90s, 30m, 2h, 1d")
    return sum(int(n) * _UNIT_MS[unit] for n, unit in _PART.findall(cleaned))


def parse_iso_ms(text: str) -> int:
    """ISO 8601 date or date-time → epoch ms. A time without a zone is UTC."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"invalid time {text!r}: expected ISO 8601, e.g. 2026-12-01T09:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


WHEN_FORMS = "a duration from now (90s, 30m, 2h, 1d, 1w, 1h30m) or an ISO 8601 time (2026-12-01T09:00Z)"


def parse_when_ms(text: str, now_ms: int) -> int:
    """A point in time: ISO 8601, or a duration meaning "that long from now".
    The error names both forms (``WHEN_FORMS``)."""
    if _WHOLE.fullmatch(text.strip().lower()):
        return now_ms + parse_duration_ms(text)
    try:
        return parse_iso_ms(text)
    except InputError:
        raise InputError(f"invalid time {text!r}: expected {WHEN_FORMS}") from None


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
