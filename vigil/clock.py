"""Time as integer Unix epoch milliseconds (UTC), from a clock that tests can replace.

Everything stored is epoch ms from ``Clock.now_ms()``; SQL never reads the time
itself. Formatting for people happens at the edges (``iso_utc``).

``AcceleratedClock`` is a testing aid: simulated time that runs a fixed factor
faster than the wall clock, so a week of the daemon's life fits in minutes
(docs/reliability.md, *Simulated week*). ``vigil run`` takes it only from the
``VIGIL_ACCELERATED_CLOCK`` environment variable (``clock_from_env``), never from
vigil.toml. Code that waits in real time for something due in clock time converts
with ``real_seconds`` and ``wall_ms``; for every other clock they are 1:1.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

from vigil.errors import ConfigError

MS_PER_SECOND = 1000
MS_PER_DAY = 86_400_000
ACCELERATED_CLOCK_ENV = "VIGIL_ACCELERATED_CLOCK"
MAX_FACTOR = 100_000.0  # past this, one real millisecond skips whole simulated minutes


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


class AcceleratedClock:
    """Simulated time: ``anchor_ms + factor × (wall − anchor_ms)``, epoch ms.

    At the wall-clock moment ``anchor_ms`` both clocks read the same; from then on
    the simulated one runs ``factor`` (≥ 1) times faster. Processes given the same
    anchor and factor agree on the simulated time.
    """

    def __init__(self, factor: float, anchor_ms: int | None = None) -> None:
        if not 1.0 <= factor <= MAX_FACTOR:
            raise ValueError(f"factor must be 1-{MAX_FACTOR:g}, not {factor:g}")
        self.factor = factor
        self.anchor_ms = SystemClock().now_ms() if anchor_ms is None else anchor_ms

    def now_ms(self) -> int:
        return self.anchor_ms + int(self.factor * (time.time_ns() / 1_000_000 - self.anchor_ms))

    def clock_ms(self, at_wall_ms: int) -> int:
        """What this clock reads at the wall-clock epoch ms ``at_wall_ms``."""
        return self.anchor_ms + int(self.factor * (at_wall_ms - self.anchor_ms))

    def wall_ms(self, at_ms: int) -> int:
        """The wall-clock epoch ms at which this clock reads ``at_ms``, rounded up (a
        scheduler woken then finds the time reached, not a few simulated ms short)."""
        return self.anchor_ms + math.ceil((at_ms - self.anchor_ms) / self.factor)


def real_seconds(clock: Clock, duration_ms: float) -> float:
    """Real seconds that pass while ``clock`` advances ``duration_ms``: a sleep until
    something due in clock time. 1:1 except for an ``AcceleratedClock``."""
    factor = clock.factor if isinstance(clock, AcceleratedClock) else 1.0
    return duration_ms / factor / MS_PER_SECOND


def wall_ms(clock: Clock, at_ms: int) -> int:
    """The wall-clock epoch ms at which ``clock`` reads ``at_ms`` (for a scheduler
    that fires on the wall clock). The identity except for an ``AcceleratedClock``."""
    return clock.wall_ms(at_ms) if isinstance(clock, AcceleratedClock) else at_ms


def clock_ms(clock: Clock, at_wall_ms: int) -> int:
    """What ``clock`` reads at the wall-clock epoch ms ``at_wall_ms`` (the inverse of
    ``wall_ms``). The identity except for an ``AcceleratedClock``."""
    return clock.clock_ms(at_wall_ms) if isinstance(clock, AcceleratedClock) else at_wall_ms


def clock_from_env(environ: Mapping[str, str]) -> Clock:
    """The daemon's clock: the system clock, unless ``VIGIL_ACCELERATED_CLOCK`` is
    set to ``FACTOR`` or ``FACTOR@ANCHOR_MS`` (a testing aid: see
    ``AcceleratedClock``; without an anchor, simulated time starts now). Raises
    ``ConfigError`` for a value that is not of that form."""
    text = environ.get(ACCELERATED_CLOCK_ENV, "").strip()
    if not text:
        return SystemClock()
    factor_text, _, anchor_text = text.partition("@")
    expected = f"{ACCELERATED_CLOCK_ENV}={text!r}: expected FACTOR or FACTOR@ANCHOR_MS (e.g. 1440)"
    try:
        factor = float(factor_text)
        anchor = int(anchor_text) if anchor_text else None
    except ValueError:
        raise ConfigError(f"{expected}, with ANCHOR_MS in Unix epoch milliseconds") from None
    try:
        return AcceleratedClock(factor, anchor)
    except ValueError as err:
        raise ConfigError(f"{expected}: {err}") from None


def iso_utc(epoch_ms: int | None) -> str | None:
    """ISO 8601 UTC text for an epoch-ms time (None stays None). Never raises: a
    stored time no calendar date can show (before year 1 or after 9999, written by
    an older Vigil or by hand) is shown as ``epoch-ms:<value>``."""
    if epoch_ms is None:
        return None
    try:
        moment = datetime.fromtimestamp(epoch_ms / MS_PER_SECOND, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return f"epoch-ms:{epoch_ms}"
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_iso_ms(text: object) -> int | None:
    """Epoch ms of an ISO 8601 time with its offset (``2026-12-04T21:38:34.419Z``,
    as the agent CLIs stamp their session files); None for anything else, a time
    without an offset included."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return None if moment.tzinfo is None else int(moment.timestamp() * MS_PER_SECOND)
