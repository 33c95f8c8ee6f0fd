"""Notices when the database changed, and when it became unusable.

``probe()`` costs one ``PRAGMA data_version`` (a few µs, one thread hop) and one
``stat`` of the file; the app calls it a few times a second. It also notices a
file that was deleted or replaced (a restore from backup): the open connection
would keep reading the old inode forever, so the store is reopened on the new
file. It never creates a missing database: it waits for it to come back.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from vigil.errors import VigilError
from vigil.store import Store


@dataclass(frozen=True)
class Probe:
    """``changed``: reload; ``problem``: show it in a banner (None: all is well);
    ``reopened``: the store object was replaced."""

    changed: bool
    problem: str | None = None
    reopened: bool = False


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


class DatabaseWatcher:
    def __init__(self, store: Store, path: Path | None, reopen: Callable[[], Awaitable[Store]]) -> None:
        """``path`` is the SQLite file to watch for replacement; None for a store
        that is not a file (PostgreSQL): then only ``data_version`` is probed."""
        self.store = store
        self.path = path
        self._reopen = reopen
        self._identity = None if path is None else _identity(path)
        self._version: int | None = None
        self._broken = False

    async def probe(self) -> Probe:
        if self.path is not None:
            identity = _identity(self.path)
            if identity is None:
                self._broken = True
                return Probe(False, f"database {self.path} is missing; waiting for it to come back")
            if identity != self._identity:
                return await self._switch(identity)
        try:
            version = await self.store.data_version()
        except VigilError as err:
            self._broken = True
            return Probe(False, f"database unavailable: {err}; retrying")
        changed = version != self._version or self._broken
        self._version = version
        self._broken = False
        return Probe(changed)

    async def _switch(self, identity: tuple[int, int]) -> Probe:
        try:
            fresh = await self._reopen()
        except VigilError as err:
            self._broken = True
            return Probe(False, f"database {self.path} was replaced and cannot be opened: {err}; retrying")
        old, self.store = self.store, fresh
        self._identity = identity
        self._version = None
        self._broken = False
        with contextlib.suppress(VigilError):  # the old file is gone; nothing left to flush
            await old.close()
        return Probe(True, reopened=True)
