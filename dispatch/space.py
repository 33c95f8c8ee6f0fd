"""A full disk is the machine's problem, not the task's.

When a run cannot write what it must (its transcript, its prompt: ``ENOSPC``,
``EDQUOT``, ``EFBIG``) the task did nothing wrong: the attempt is given back (the
task is pending again, its attempt not counted), no failure is counted towards the
guard's gate, and the loop claims nothing for a while: ``[dispatch]
retry_backoff``, doubled after each such run in a row up to ``retry_backoff_max``.
Each wait is announced by one warning; the first run that can write again ends it.
"""

from __future__ import annotations

import errno
import logging

from dispatch.guard import ClaimDecision
from vigil.clock import Clock
from vigil.config import DispatchSettings
from vigil.durations import format_duration

log = logging.getLogger("vigil.dispatch")

OUT_OF_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def out_of_space(err: BaseException) -> bool:
    """Whether ``err`` says the disk (or a quota, or a file-size limit) is full."""
    return isinstance(err, OSError) and err.errno in OUT_OF_SPACE


class OutOfSpace(Exception):
    """An executor could not write for want of space (``error``, the ``OSError``)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class SpaceWait:
    """How long the loop holds off after runs that found the disk full."""

    def __init__(self, settings: DispatchSettings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._in_a_row = 0
        self._until: int | None = None  # clock ms
        self._reason = ""

    def full(self, err: OSError) -> str:
        """A run found the disk full: start (or lengthen) the wait and warn once.
        Returns the one line to record on the run."""
        self._in_a_row += 1
        doubling = min(self._in_a_row - 1, 32)
        wait_ms = min(self._settings.retry_backoff_max_ms, self._settings.retry_backoff_ms * (1 << doubling))
        self._until = self._clock.now_ms() + wait_ms
        where = f": {err.filename}" if err.filename else ""
        self._reason = f"the disk is full ({err.strerror}{where})"
        wait = f"{wait_ms / 1000:g}s" if wait_ms < 60_000 else format_duration(wait_ms)
        log.warning("%s: not running tasks for %s; the task was given back", self._reason, wait)
        return f"not run: {self._reason}; given back, its attempt not counted"

    def decision(self, now_ms: int) -> ClaimDecision | None:
        """A refusal to claim while the wait lasts; None once it is over."""
        if self._until is None or now_ms >= self._until:
            return None
        return ClaimDecision(False, reason=f"{self._reason}: waiting", until=self._until)

    def wrote(self) -> None:
        """A run could write: the disk has room again."""
        if self._in_a_row:
            log.info("the disk has room again: running tasks")
        self._in_a_row = 0
        self._until = None
