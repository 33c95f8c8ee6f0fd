"""Fixtures of the store contract suite: every test that takes ``store`` runs once per
backend in ``backends.BACKENDS``: on a real file in ``tmp_path`` (SQLite) and on a
fresh database of a real server (PostgreSQL; skipped with the reason when no server
can be had)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tests.store.backends import BACKENDS, open_backend
from vigil.clock import ManualClock
from vigil.store import Store

StoreOpener = Callable[[], Awaitable[Store]]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "vigil.db"


@pytest.fixture
def location(backend: str, db_path: Path, request: pytest.FixtureRequest) -> Path | str:
    """Where the backend's store lives: the SQLite file, or a fresh PostgreSQL
    database, already migrated (the server is started only when a PostgreSQL test
    runs)."""
    if backend == "postgres":
        return str(request.getfixturevalue("postgres_migrated_url"))
    return db_path


@pytest.fixture
def postgres_admin(backend: str, request: pytest.FixtureRequest) -> str | None:
    """The PostgreSQL server's admin URL for the postgres backend (None for SQLite),
    for tests that need several fresh databases."""
    return str(request.getfixturevalue("postgres_server")) if backend == "postgres" else None


@pytest.fixture
def template(backend: str, request: pytest.FixtureRequest) -> str | None:
    """For the postgres backend, the name of the session's migrated database to copy
    fresh ones from (``fresh_location``); None for SQLite."""
    return str(request.getfixturevalue("postgres_template")) if backend == "postgres" else None


@pytest.fixture
async def connect_store(backend: str, location: Path | str, clock: ManualClock) -> AsyncIterator[StoreOpener]:
    """Opens another connection to the same store (as a second process would)."""
    opened: list[Store] = []

    async def connect() -> Store:
        store = await open_backend(backend, location, clock)
        opened.append(store)
        return store

    yield connect
    for store in opened:
        await store.close()


@pytest.fixture
async def store(connect_store: StoreOpener) -> Store:
    """The store under contract, on the manual clock (overrides the SQLite-only one)."""
    return await connect_store()
