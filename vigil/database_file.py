"""Noticing, under ``vigil run``, that the SQLite file was replaced, removed or lost
its write-ahead log.

An open connection keeps the file it opened, whatever the path names later. After
``mv backup.db data/vigil.db`` or ``rm data/vigil.db`` the daemon would go on
claiming and recording on a file nobody else reads, while the new file's first
opener would replay the old write-ahead log onto it. After ``rm vigil.db-wal``
every other process fails to read. So the daemon looks (two ``stat`` calls) every
``CHECK_S`` real seconds and, at the first sign, stops: the running task is ended
at once, and closing the connection writes a deleted log's changes back into the
database. Every unit of work also checks the file itself
(``sqlite.db.Connection.check_file``), so nothing is written in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

log = logging.getLogger("vigil.daemon")

CHECK_S = 0.5  # real seconds between looks


async def watch_database_file(
    problem_of: Callable[[], str | None],
    stop: asyncio.Event,
    on_problem: Callable[[str], None],
    *,
    check_s: float = CHECK_S,
) -> None:
    """Until ``stop``: every ``check_s``, ask ``problem_of`` (None: all is well); at
    the first problem, log it, call ``on_problem`` with it and set ``stop``."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), check_s)
            return
        problem = problem_of()
        if problem is not None:
            log.error("%s", problem)
            on_problem(problem)
            stop.set()
            return
