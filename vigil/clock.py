"""Time as integer Unix epoch milliseconds (UTC), from a clock that tests can replace.

Everything stored is epoch ms from ``Clock.now_ms()``; SQL never reads the time
itself. Formatting for people happens at the edges (``iso_utc``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

MS_PER_SECOND = 1000
MS_PER_DAY = 86_400_000


class Clock(Protocol):
    """Source of the current time."""

    def now_ms(self) -> int:
        """Current time as Unix epoch milliseconds, UTC."""
        ...


class SystemClock:
    """The wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to (tests, simulations)."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        self._now_ms += ms

    def set(self, ms: int) -> None:
        self._now_ms = ms


def iso_utc(epoch_ms: int | None) -> str | None:
    """ISO 8601 UTC text for an epoch-ms time (None stays None)."""
    if epoch_ms is None:
        return None
    moment = datetime.fromtimestamp(epoch_ms / MS_PER_SECOND, tz=UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
