"""The store backends the contract suite runs against, and how to open each.

Only SQLite exists today; a PostgreSQL backend adds its name to ``BACKENDS`` and a
branch to ``open_backend``, and every contract test then runs against it too.
"""

from __future__ import annotations

from pathlib import Path

from vigil.clock import Clock
from vigil.config import LimitsSettings
from vigil.store import Store
from vigil.store.sqlite import SqliteStore

BACKENDS = ("sqlite",)


async def open_backend(
    name: str, path: Path, clock: Clock, *, busy_timeout_ms: int = 5000, limits: LimitsSettings | None = None
) -> Store:
    """Open a store of backend ``name``; ``path`` locates its data (a file for SQLite).
    ``limits`` are the flood limits its inserts obey (None: none)."""
    if name == "sqlite":
        return await SqliteStore.open(path, clock=clock, busy_timeout_ms=busy_timeout_ms, limits=limits)
    raise ValueError(f"unknown backend {name!r}")
