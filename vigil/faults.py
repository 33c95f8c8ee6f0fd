"""Crash points, for the reliability tests' crash matrix; no effect unless set.

``VIGIL_FAULT=<point>`` (or ``<point>:<n>``, the n-th time it is reached, default
the first) makes the process kill itself with SIGKILL at that point, so a test can
prove that a crash there loses nothing. The points: ``sensor-batch`` (inside the
transaction of a batch insert), ``after-claim`` (claimed, executor not started),
``during-finish`` (inside the transaction that records an outcome),
``during-migration`` (inside a migration's transaction) and ``during-backup``
(between two steps of an online backup). The variable is read once, at import.
"""

from __future__ import annotations

import os
import signal

_SPEC = os.environ.get("VIGIL_FAULT", "")
_POINT, _, _NTH = _SPEC.partition(":")
_hits = 0


def crash_point(name: str) -> None:
    """Die here (SIGKILL, no cleanup) if ``VIGIL_FAULT`` names this point."""
    global _hits  # noqa: PLW0603 (one counter per process, by design)
    if not _POINT or name != _POINT:
        return
    _hits += 1
    if _hits >= int(_NTH or 1):
        os.kill(os.getpid(), signal.SIGKILL)
