"""Fixtures of the store contract suite: every test that takes ``store`` runs once per
backend in ``backends.BACKENDS``, on real files in ``tmp_path``."""

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
async def connect_store(backend: str, db_path: Path, clock: ManualClock) -> AsyncIterator[StoreOpener]:
    """Opens another connection to the same store (as a second process would)."""
    opened: list[Store] = []

    async def connect() -> Store:
        store = await open_backend(backend, db_path, clock)
        opened.append(store)
        return store

    yield connect
    for store in opened:
        await store.close()


@pytest.fixture
async def store(connect_store: StoreOpener) -> Store:
    """The store under contract, on the manual clock (overrides the SQLite-only one)."""
    return await connect_store()
