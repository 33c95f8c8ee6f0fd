"""Keeping SQLite's write-ahead log small while ``vigil run`` works.

SQLite's automatic checkpoints (every 1000 pages, by whichever connection commits)
copy the log back into the database but can restart it from the beginning only at
a moment when no reader holds an older snapshot. With many processes reading
without pause that moment never comes, and the log grows without bound (measured:
59 MiB in a minute under 50 processes). So the daemon looks at the log file's size
every second (a ``stat``, no database work) and, past ``WAL_LIMIT_BYTES``, runs a
``TRUNCATE`` checkpoint: it holds off new writers for at most
``sqlite_db.TRUNCATE_WAIT_MS`` while the short read transactions in flight end,
copies every page and empties the file. Every five minutes it also runs a passive
checkpoint and warns when pages stay behind (a reader stuck on an old snapshot: a
forgotten ``sqlite3`` shell), which no checkpoint can get past.
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


async def keep_wal_small(
    store: Store,
    stop: asyncio.Event,
    *,
    interval_s: float = WAL_CHECK_S,
    wal_path: Path | None = None,
    limit_bytes: int = WAL_LIMIT_BYTES,
    size_check_s: float = WAL_SIZE_CHECK_S,
) -> None:
    """Until ``stop``: empty the log at ``wal_path`` (None: never looked at) with a
    ``TRUNCATE`` checkpoint whenever it is larger than ``limit_bytes`` (checked every
    ``size_check_s``), run a passive checkpoint every ``interval_s``, and warn while
    more than ``WAL_WARN_PAGES`` pages stay behind a reader's old snapshot."""
    loop = asyncio.get_running_loop()
    tick_s = interval_s if wal_path is None else min(interval_s, size_check_s)
    next_passive = loop.time() + interval_s
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), tick_s)
            return
        size = _size(wal_path)
        truncate = size > limit_bytes
        if not truncate and loop.time() < next_passive:
            continue
        if not truncate:
            next_passive = loop.time() + interval_s
        try:
            logged, copied = await store.checkpoint(truncate=truncate)
        except VigilError as err:
            log.warning("WAL checkpoint failed: %s", err)
            continue
        if truncate:
            log.debug("write-ahead log at %d bytes: emptied (%d pages left behind)", size, logged - copied)
        if logged - copied > WAL_WARN_PAGES:
            log.warning(
                "the write-ahead log keeps %d pages it cannot copy back: another process holds an old read "
                "snapshot (a stuck reader?); the file grows until it lets go",
                logged - copied,
            )
