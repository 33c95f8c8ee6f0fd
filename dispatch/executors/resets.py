"""Reset times named in usage-limit messages, as epoch milliseconds.

Agent CLIs say when a subscription limit resets in several ways: an epoch after a
bar (``Claude AI usage limit reached|1767225600``), a clock time and zone
(``resets 4:50pm (America/Denver)``), a date (``try again at Apr 11th, 2026
2:32 PM``, in local time), or only a time of day, when the reset is within a day
(Codex: ``try again at 3:46 PM.``, local time), or a date and time in UTC (an API
workspace's spend limit, an HTTP 400: ``You will regain access on 2025-06-01 at
00:00 UTC.``). Each parser returns None when the text does not say, and the
dispatcher then waits its configured fallback.

A time named to the minute is the minute the CLI cut the reset down to (Claude
Code prints 02:29:54 as ``2:29am``, Codex 21:45:45 as ``9:45 PM``), so the reset is
read as the end of that minute: waiting until then never wakes the loop before the
limit has lifted. A time of day without a date is the nearest such moment that is
not more than ``PAST_TOLERANCE_MS`` ago: the current minute is this minute, not
tomorrow's, and a reset a little in the past (a stale header, a clock that runs
behind, a limit met again just after its reset) is read as past, so the gate's
floor decides when to try again; only a time further back means tomorrow.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MS_PER_S = 1000
MINUTE = timedelta(minutes=1)
# A time of day at most this far in the past is a reset that already happened, not
# the same time tomorrow (a limit's own window is hours long, a stale header seconds).
PAST_TOLERANCE_MS = 3_600_000
_BAR_EPOCH = re.compile(r"usage limit reached\|(\d{9,12})", re.IGNORECASE)
_CLOCK_ZONE = re.compile(r"resets\s+(\d{1,2})(?::(\d{2}))?\s*([ap]m)\s*\(([^()\s]+)\)", re.IGNORECASE)
_TRY_AGAIN = re.compile(
    r"try again at\s+([A-Z][a-z]{2})[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4}),?\s+(\d{1,2}):(\d{2})\s*([AP]M)",
    re.IGNORECASE,
)
_TRY_AGAIN_CLOCK = re.compile(r"try again at\s+(\d{1,2}):(\d{2})\s*([AP]M)\b", re.IGNORECASE)
_REGAIN = re.compile(r"regain access on (\d{4})-(\d{2})-(\d{2}) at (\d{1,2}):(\d{2}) UTC", re.IGNORECASE)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def _hour24(hour: int, meridiem: str) -> int | None:
    if not 1 <= hour <= 12:
        return None
    return hour % 12 + (12 if meridiem.lower() == "pm" else 0)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * MS_PER_S)


def nearest_time_of_day(hour: int, minute: int, now_ms: int, zone: tzinfo | None) -> int:
    """The end of the minute ``hour:minute`` (in ``zone``; None: local time) on the
    day that puts it nearest after ``now_ms - PAST_TOLERANCE_MS``, in epoch ms."""
    now = datetime.fromtimestamp(now_ms / MS_PER_S, tz=zone)
    today = now.replace(hour=hour, minute=minute, second=0, microsecond=0) + MINUTE
    earliest = now_ms - PAST_TOLERANCE_MS
    for days in (-1, 0, 1):
        moment = _ms(today + timedelta(days=days))
        if moment > earliest:
            return moment
    return _ms(today + timedelta(days=2))  # unreachable: tomorrow's is always past the bound


def bar_epoch_ms(text: str) -> int | None:
    """``…usage limit reached|<epoch seconds>`` → epoch ms."""
    match = _BAR_EPOCH.search(text)
    return int(match.group(1)) * MS_PER_S if match else None


def clock_zone_ms(text: str, now_ms: int) -> int | None:
    """``resets 4:50pm (America/Denver)`` → the end of that minute, on the nearest
    day (see the module's docstring)."""
    match = _CLOCK_ZONE.search(text)
    if not match:
        return None
    hour = _hour24(int(match.group(1)), match.group(3))
    minute = int(match.group(2) or 0)
    if hour is None or minute > 59:
        return None
    try:
        zone = ZoneInfo(match.group(4))
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return nearest_time_of_day(hour, minute, now_ms, zone)


def try_again_ms(text: str) -> int | None:
    """``try again at Apr 11th, 2026 2:32 PM`` (local time) → the end of that minute."""
    match = _TRY_AGAIN.search(text)
    if not match:
        return None
    month_name, day, year, hour, minute, meridiem = match.groups()
    hour24 = _hour24(int(hour), meridiem)
    if month_name.lower() not in _MONTHS or hour24 is None:
        return None
    try:
        moment = datetime(int(year), _MONTHS.index(month_name.lower()) + 1, int(day), hour24, int(minute))
    except ValueError:
        return None
    # a naive datetime is local time, which is what the CLI printed
    return _ms(moment + MINUTE)


def try_again_clock_ms(text: str, now_ms: int) -> int | None:
    """``try again at 3:46 PM`` (local time, no date) → the end of that minute, on
    the nearest day (see the module's docstring)."""
    match = _TRY_AGAIN_CLOCK.search(text)
    if not match:
        return None
    hour = _hour24(int(match.group(1)), match.group(3))
    minute = int(match.group(2))
    if hour is None or minute > 59:
        return None
    return nearest_time_of_day(hour, minute, now_ms, None)  # local time, which is what the CLI printed


def regain_ms(text: str) -> int | None:
    """``You will regain access on 2025-06-01 at 00:00 UTC`` → that moment."""
    match = _REGAIN.search(text)
    if not match:
        return None
    year, month, day, hour, minute = (int(part) for part in match.groups())
    try:
        moment = datetime(year, month, day, hour, minute, tzinfo=UTC)
    except ValueError:
        return None
    return _ms(moment)


def reset_ms(text: str, now_ms: int) -> int | None:
    """The first reset time any known form in ``text`` names; None if none does."""
    return (
        bar_epoch_ms(text)
        or clock_zone_ms(text, now_ms)
        or try_again_ms(text)
        or try_again_clock_ms(text, now_ms)
        or regain_ms(text)
    )
