"""What every store behaviour is written against, whatever the backend.

A behaviour (add a task, cancel it, record a sensor run …) is a plain function of a
``Tx``: one open transaction, or an autocommit session for a read, of a blocking
connection. It runs statements it imports by name from the store's SQL
(``vigil.store.sql.<concern>``: ``tx.run(CANCEL, params)``), so it is written once
and a reader jumps from the name to the text. A statement is an ``Sql``: one text
both backends run, or the two dialects' texts side by side; each ``Tx`` runs its
own.

An ``Engine`` runs a behaviour in a transaction (``write``) or a read session
(``read``), retrying the whole body when the database stays busy; the two things
each backend does its own way (claiming a task with its run, a compare-and-set of a
loop value) are its engine's. A one-shot command calls it directly; the async
stores run each whole call in a worker thread, one hop per unit of work.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from vigil.store.rows import Row

T = TypeVar("T")
Params = Mapping[str, Any]


def dialect(sql: str) -> str:
    """A statement in psycopg's style: ``:name`` becomes ``%(name)s`` (a ``::``
    cast is left alone), a literal ``%`` becomes ``%%``."""
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql.replace("%", "%%"))


class Sql:
    """One statement under one name. ``Sql(text)``: standard SQL both backends run
    as written; ``Sql(sqlite=…, postgres=…)``: the two dialects side by side, where
    they differ. Every text names its parameters ``:name`` (the same names on both;
    ``now`` is always the store clock's epoch ms); PostgreSQL's is rewritten to
    psycopg's ``%(name)s`` once, on first use (``dialect``). A dialect given as None
    has nothing to run for this statement: ``Tx.run`` does nothing there (returns 0)
    and ``Tx.one`` / ``Tx.all`` refuse it."""

    __slots__ = ("_pg_source", "_postgres", "sqlite")

    def __init__(self, text: str | None = None, *, sqlite: str | None = None, postgres: str | None = None) -> None:
        if text is not None:
            sqlite = postgres = text
        self.sqlite = sqlite
        self._pg_source = postgres
        self._postgres: str | None = None

    @property
    def postgres(self) -> str | None:
        """PostgreSQL's text in psycopg's style (derived once)."""
        if self._postgres is None and self._pg_source is not None:
            self._postgres = dialect(self._pg_source)
        return self._postgres


class Tx(Protocol):
    """One transaction (or read session) of a blocking connection."""

    def one(self, sql: Sql, params: Params | None = None) -> Row | None:
        """The first row of ``sql``, or None."""
        ...

    def all(self, sql: Sql, params: Params | None = None) -> Sequence[Row]: ...

    def run(self, sql: Sql, params: Params | None = None) -> int:
        """Execute ``sql``; the number of rows it changed (0: nothing to run here)."""
        ...

    def many(self, sql: Sql, rows: Iterable[Params]) -> None:
        """Execute ``sql`` once per parameter set."""
        ...

    def loads(self, value: Any) -> Any:
        """A JSON column's value as Python (SQLite stores text, PostgreSQL jsonb)."""
        ...

    def dumps(self, value: object) -> Any:
        """A Python value as the parameter of a JSON column."""
        ...

    def array(self, values: Sequence[object]) -> Any:
        """A list (ids, kinds) as the parameter of ``… IN :ids`` (a JSON array on
        SQLite, an array on PostgreSQL)."""
        ...


class Engine(Protocol):
    """Runs behaviours on one backend's blocking connection(s), in the caller's thread."""

    def read(self, fn: Callable[[Tx], T]) -> T:
        """Run a read-only body (each statement sees what is committed)."""
        ...

    def write(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in one transaction: committed on success, rolled back on any
        exception, retried whole while the database stays busy (then ``StoreBusy``)."""
        ...

    def snapshot(self, fn: Callable[[Tx], T]) -> T:
        """Run a read-only body in one read transaction: every statement sees the
        same committed state (several reads that must agree, such as a page of
        rows and its counts). It never blocks a writer."""
        ...

    def claim(self, tx: Tx, params: Params) -> tuple[Row, Row] | None:
        """Claim the most urgent due task with priority ≤ ``max_priority`` (params:
        ``now``, ``worker``, ``lease_until``, ``executor``, ``max_priority``) and open
        its run, in the caller's transaction ``tx``: the task's row and the run's
        (``id``, ``attempt``); None: none due."""
        ...

    def replace_loop_value(self, tx: Tx, key: str, expected: object, value: object) -> bool:
        """Write ``value`` under ``key`` only if its JSON value equals ``expected``
        (None: absent), in the caller's transaction ``tx``; whether it wrote."""
        ...
