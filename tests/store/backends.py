"""The store backends the contract suite runs against, and how to open each.

A backend's store lives at a *location*: a file for SQLite, a database URL for
PostgreSQL (a fresh database per test, already migrated: the
``postgres_migrated_url`` fixture).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vigil.clock import Clock
from vigil.config import LimitsSettings
from vigil.store import Store
from vigil.store.sqlite import SqliteStore

BACKENDS = ("sqlite", "postgres")


async def open_backend(
    name: str, location: Path | str, clock: Clock, *, busy_timeout_ms: int = 5000, limits: LimitsSettings | None = None
) -> Store:
    """Open a store of backend ``name`` at ``location`` (a file for SQLite, a URL
    for PostgreSQL). ``limits`` are the flood limits its inserts obey (None: none)."""
    if name == "sqlite":
        return await SqliteStore.open(Path(location), clock=clock, busy_timeout_ms=busy_timeout_ms, limits=limits)
    if name == "postgres":
        from vigil.store.postgres import PostgresStore

        return await PostgresStore.open(str(location), clock=clock, limits=limits)
    raise ValueError(f"unknown backend {name!r}")


@contextmanager
def fresh_location(
    name: str, folder: Path, postgres_admin_url: str | None, template: str | None = None
) -> Iterator[Path | str]:
    """A new location for backend ``name``: a file in ``folder`` for SQLite, a fresh
    database on the server at ``postgres_admin_url`` (a copy of database
    ``template``, else empty; dropped afterwards)."""
    if name == "sqlite":
        yield folder / "vigil.db"
        return
    from tests.postgres_server import fresh_database

    assert postgres_admin_url is not None, "a PostgreSQL location needs the server's URL"
    with fresh_database(postgres_admin_url, template) as url:
        yield url
