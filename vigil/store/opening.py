"""Opening the store the settings name: the home's SQLite file, or the PostgreSQL
database of ``[store] url`` / ``VIGIL_STORE_URL``.

``open_store`` opens the async ``Store`` the long-running processes use;
``task_desk`` gives one-shot commands the blocking ``Tasks`` behaviours (on SQLite,
a plain connection in the caller's thread: no event loop, no worker thread).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from vigil.clock import Clock
from vigil.config import Settings
from vigil.distribution import POSTGRES_EXTRA
from vigil.errors import StoreError

if TYPE_CHECKING:
    from vigil.store.base import Store
    from vigil.store.postgres import PostgresStore
    from vigil.store.tasks import Tasks


async def open_store(settings: Settings, clock: Clock | None = None) -> Store:
    """Open the store the settings name: the PostgreSQL database at
    ``settings.store.url``, else the home's SQLite file. psycopg is imported only
    for PostgreSQL; without it, raises ``StoreError`` saying what to install."""
    if settings.store.url is not None:
        return await _open_postgres(settings, clock)
    from vigil.store.sqlite import SqliteStore

    return await SqliteStore.open(
        settings.store.path,
        clock=clock,
        synchronous=settings.store.synchronous,
        busy_timeout_ms=settings.store.busy_timeout_ms,
        default_max_retries=settings.dispatch.max_retries,
        limits=settings.limits,
        pass_env=settings.dispatch.pass_env,
    )


@contextmanager
def task_desk(settings: Settings) -> Iterator[Tasks]:
    """The task methods of the store the settings name, blocking, for one-shot
    commands. On SQLite they run on a plain connection in the caller's thread: no
    event loop, no worker thread. On PostgreSQL the store is opened with an event
    loop (its migration and listener are async) and the calls borrow its pooled
    sessions. Closed on exit; raises as ``open_store``."""
    if settings.store.url is not None:
        import asyncio

        with asyncio.Runner() as runner:
            store = runner.run(_open_postgres(settings, None))
            try:
                yield store.tasks
            finally:
                runner.run(store.close())
        return
    from vigil.clock import SystemClock
    from vigil.store.sqlite.db import Connection, SqliteEngine
    from vigil.store.sqlite.schema import check_openable, migrate
    from vigil.store.tasks import Tasks

    path = settings.store.path
    conn = Connection.open(
        path,
        synchronous=settings.store.synchronous,
        busy_timeout_ms=settings.store.busy_timeout_ms,
        check=check_openable,
    )
    try:
        conn.read(lambda c: migrate(c, path))
        yield Tasks(
            SqliteEngine(conn),
            SystemClock(),
            settings.dispatch.max_retries,
            settings.limits,
            pass_env=settings.dispatch.pass_env,
        )
    finally:
        conn.close()


async def _open_postgres(settings: Settings, clock: Clock | None) -> PostgresStore:
    url = settings.store.url
    assert url is not None
    try:
        from vigil.store.postgres import PostgresStore
    except ImportError as err:
        if (err.name or "").split(".")[0] not in ("psycopg", "psycopg_pool"):
            raise
        raise StoreError(
            f"{settings.store.location} needs PostgreSQL support, which is not installed: "
            f"pip install '{POSTGRES_EXTRA}'"
        ) from None
    return await PostgresStore.open(
        url,
        clock=clock,
        default_max_retries=settings.dispatch.max_retries,
        limits=settings.limits,
        busy_timeout_ms=settings.store.busy_timeout_ms,
        pass_env=settings.dispatch.pass_env,
    )
