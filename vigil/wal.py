"""Keeping SQLite's write-ahead log small while ``vigil run`` works.

SQLite's automatic checkpoints (every 1000 pages, by whichever connection commits)
copy the log back into the database but can restart it from the beginning only at
a moment when no reader holds an older snapshot. With many processes reading
without pause that moment never comes, and the log grows without bound (measured:
59 MiB in a minute under 50 processes). So the daemon looks at the log file's size
every second (a ``stat``, no database work) and, past ``WAL_LIMIT_BYTES``, runs a
``TRUNCATE`` checkpoint: it holds off new writers for at most
``sqlite.db.TRUNCATE_WAIT_MS`` while the short read transactions in flight end,
copies every page and empties the file. Every five minutes it also runs a passive
checkpoint and warns when pages stay behind (a reader stuck on an old snapshot: a
forgotten ``sqlite3`` shell), which no checkpoint can get past; against such a
reader the TRUNCATE attempts back off.

``wal_autocheckpoint`` stays at SQLite's 1000 pages: a smaller value checkpoints
more often but, being passive, cannot restart the log under such readers either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from vigil.errors import VigilError

if TYPE_CHECKING:
    from vigil.store import Store

log = logging.getLogger("vigil.daemon")

WAL_CHECK_S = 300.0  # how often the write-ahead log is checkpointed (passive)
WAL_SIZE_CHECK_S = 1.0  # how often the log file's size is looked at (real seconds)
# Twice the automatic checkpoint's 1000 pages: a log past this was not restarted by
# those checkpoints (readers never paused), so the daemon empties it itself.
WAL_LIMIT_BYTES = 8 * 1024 * 1024
WAL_WARN_PAGES = 25_000  # about 100 MB of 4 KiB pages left in the log: warn
MAX_BACKOFF_DOUBLINGS = 8  # a failed TRUNCATE is retried after at most 256 ticks (about 4 min)


def wal_path_of(database: Path) -> Path:
    """The write-ahead log beside an SQLite database file."""
    return database.with_name(database.name + "-wal")


def _size(path: Path | None) -> int:
    """Bytes in ``path``; 0 when there is no such file (or no path)."""
    if path is None:
        return 0
    try:
        return path.stat().st_size
    except OSError:
        return 0


class WalKeeper:
    """What the daemon does with the log on each tick (one call of ``step``).

    Past ``limit_bytes`` it runs a ``TRUNCATE`` checkpoint. One that fails (a reader
    stayed past the short wait) is tried again on the next tick, then after 2, 4,
    8 … ticks, up to ``2 ** MAX_BACKOFF_DOUBLINGS``: a reader stuck for good must
    not cost every writer a short stall each second. Every ``passive_every`` ticks it runs a
    passive checkpoint; both warn when pages stay behind an old snapshot.
    """

    def __init__(self, store: Store, wal_path: Path | None, *, limit_bytes: int, passive_every: int) -> None:
        self._store = store
        self._wal_path = wal_path
        self._limit_bytes = limit_bytes
        self._passive_every = passive_every
        self._tick = 0
        self._next_passive = passive_every
        self._next_truncate = 0
        self.failures = 0  # TRUNCATE checkpoints in a row that did not empty the log

    async def step(self) -> str | None:
        """One tick: ``"truncate"`` or ``"passive"`` when it checkpointed, else None."""
        self._tick += 1
        size = _size(self._wal_path)
        if size > self._limit_bytes and self._tick >= self._next_truncate:
            emptied = await self._checkpoint(truncate=True) == (0, 0)
            self.failures = 0 if emptied else self.failures + 1
            # retried on the next tick after one miss (a busy moment), then ever later (a stuck reader)
            wait_ticks = 2 ** min(self.failures - 1, MAX_BACKOFF_DOUBLINGS) if self.failures else 0
            self._next_truncate = self._tick + wait_ticks
            log.debug(
                "write-ahead log at %d bytes: %s", size, "emptied" if emptied else "not emptied (a reader stayed)"
            )
            return "truncate"
        if self._tick >= self._next_passive:
            self._next_passive = self._tick + self._passive_every
            await self._checkpoint(truncate=False)
            return "passive"
        return None

    async def _checkpoint(self, *, truncate: bool) -> tuple[int, int] | None:
        try:
            logged, copied = await self._store.checkpoint(truncate=truncate)
        except VigilError as err:
            log.warning("WAL checkpoint failed: %s", err)
            return None
        if logged - copied > WAL_WARN_PAGES:
            log.warning(
                "the write-ahead log keeps %d pages it cannot copy back: another process holds an old read "
                "snapshot (a stuck reader?); the file grows until it lets go",
                logged - copied,
            )
        return logged, copied


async def keep_wal_small(
    store: Store,
    stop: asyncio.Event,
    *,
    interval_s: float = WAL_CHECK_S,
    wal_path: Path | None = None,
    limit_bytes: int = WAL_LIMIT_BYTES,
    size_check_s: float = WAL_SIZE_CHECK_S,
) -> None:
    """Until ``stop``, a ``WalKeeper`` tick every ``size_check_s`` (every
    ``interval_s`` when ``wal_path`` is None: the size is then never looked at), with
    a passive checkpoint every ``interval_s``."""
    tick_s = interval_s if wal_path is None else min(interval_s, size_check_s)
    keeper = WalKeeper(store, wal_path, limit_bytes=limit_bytes, passive_every=max(1, round(interval_s / tick_s)))
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), tick_s)
            return
        await keeper.step()
