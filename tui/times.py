"""How the TUI writes time, one way on every screen.

A moment is local time by default, UTC on request (``Times.at``). Local means
``[tui] timezone`` when set (an IANA name such as ``Europe/Paris``), else the
machine's zone (``TZ`` or the system's). ``z`` switches every screen between
local time and UTC. The store keeps UTC epoch milliseconds; only the text
changes. Days (the header's "today", the costs per day) are the days of the
zone shown.

A length of time is whole minutes (``span``): ``<1m``, ``12m``, ``3h05m``,
``2d04h``; a time relative to now is ``in 12m`` or ``12m ago`` (``relative``).
Whole minutes make every relative cell change at once, once a minute.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

from vigil.clock import iso_utc
from vigil.durations import format_duration

MINUTE_MS = 60_000


def span(ms: int) -> str:
    """A length of time in whole minutes: ``<1m``, ``12m``, ``3h05m``, ``2d04h``."""
    return "<1m" if ms < MINUTE_MS else format_duration(ms)


def relative(at_ms: int, now_ms: int) -> str:
    """``in 12m`` for the future, ``12m ago`` for the past (``<1m`` either side of now)."""
    return f"in {span(at_ms - now_ms)}" if at_ms > now_ms else f"{span(now_ms - at_ms)} ago"


class Times:
    """``zone_name`` None: the machine's zone. ``utc`` True shows UTC instead."""

    def __init__(self, zone_name: str | None = None) -> None:
        self._zone: tzinfo | None = ZoneInfo(zone_name) if zone_name else None
        self.utc = False

    def _moment(self, epoch_ms: int) -> datetime:
        if self.utc:
            return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
        if self._zone is None:  # the machine's zone, with its offset at that moment
            return datetime.fromtimestamp(epoch_ms / 1000).astimezone()
        return datetime.fromtimestamp(epoch_ms / 1000, tz=self._zone)

    def at(self, epoch_ms: int) -> str:
        """``2026-01-01 04:00:00 EST`` locally, ``2026-01-01T09:00:00Z`` in UTC; a time
        no date can show (past year 9999) as ``vigil.clock.iso_utc`` shows it."""
        try:
            moment = self._moment(epoch_ms)
        except (ValueError, OverflowError, OSError):
            return iso_utc(epoch_ms) or ""
        if self.utc:
            return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
        return moment.strftime("%Y-%m-%d %H:%M:%S %Z").rstrip()

    @property
    def label(self) -> str:
        """``UTC`` or ``local``, for the key that switches."""
        return "UTC" if self.utc else "local"

    def day(self, epoch_ms: int) -> str:
        """The day (``YYYY-MM-DD``) of ``epoch_ms`` in the zone shown."""
        return self._moment(epoch_ms).strftime("%Y-%m-%d")

    def start_of_day(self, epoch_ms: int) -> int:
        """Epoch ms of the midnight that begins ``epoch_ms``'s day in the zone shown."""
        if self._zone is None and not self.utc:  # naive local wall time, resolved by the C library
            midnight = datetime.fromtimestamp(epoch_ms / 1000).replace(hour=0, minute=0, second=0, microsecond=0)
            return int(midnight.astimezone().timestamp() * 1000)
        # A zone-aware replace re-reads the offset for the new wall time (DST days).
        midnight = self._moment(epoch_ms).replace(hour=0, minute=0, second=0, microsecond=0)
        return int(midnight.timestamp() * 1000)
