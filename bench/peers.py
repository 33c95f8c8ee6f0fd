"""The other side of each comparison: plain ``sqlite3`` at Vigil's durability, and
the queues a Python user might pick instead (huey's SQLite storage, persist-queue,
litequeue), installed by ``pip install -e .[bench]``.

Every opener returns a ``Contender`` whose ``durability`` is read back from the
peer's own connection, so a table never claims a setting that was not in force.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from bench.harness import Contender, synchronous_of, timed_calls
from vigil.store.sqlite.schema import MIGRATIONS

PEER_PACKAGES = ("huey", "persistqueue", "litequeue")  # import names of the `bench` extra

# The columns ``SqliteStore.add_task`` writes, in the same order, as positional
# parameters: what a plain sqlite3 user would insert into the same table.
INSERT_TASK = """
INSERT INTO tasks (subject, description, skills, priority, source, source_key, dedup,
                   scheduled_for, created_at, updated_at, updated_by, max_retries)
VALUES (?, '', '[]', ?, ?, ?, 'open', ?, ?, ?, ?, 3)
"""
INSERT_TASK_IGNORE = INSERT_TASK + " ON CONFLICT DO NOTHING"


def missing_peers() -> list[str]:
    """Import names of the peer packages that are not installed."""
    import importlib.util

    return [name for name in PEER_PACKAGES if importlib.util.find_spec(name) is None]


def tasks_table_ddl() -> list[str]:
    """Vigil's ``tasks`` table and its indexes (unique source-key indexes included),
    without the triggers: the "equivalent table" a plain sqlite3 user would have.
    Taken from every migration, so a later column or index is there too (a
    rebuild's check only widens the statuses: left out)."""
    statements = [s for migration in MIGRATIONS for s in migration if isinstance(s, str)]
    return [
        s
        for s in statements
        if re.search(r"\b(CREATE TABLE|ALTER TABLE) tasks\b", s)
        or (re.search(r"\bON tasks\b", s) and "TRIGGER" not in s)
    ]


def plain_connect(path: Path, *, create: bool) -> sqlite3.Connection:
    """A plain connection at Vigil's durability: WAL, ``synchronous=FULL``; with
    ``create`` it makes the equivalent tasks table (else the file has a schema)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    if create:
        for statement in tasks_table_ddl():
            conn.execute(statement)
    return conn


def task_row(subject: str, now_ms: int, source_key: str | None = None, source: str = "human") -> tuple[object, ...]:
    """Parameters of ``INSERT_TASK`` for one task (priority 5, due now)."""
    return (subject, 5, source, source_key, now_ms, now_ms, now_ms, "human")


def plain_single_insert(name: str, conn: sqlite3.Connection, now_ms: int) -> Contender:
    """One INSERT and one COMMIT per task, as ``sqlite3`` users write it."""

    def one(i: int) -> None:
        conn.execute("BEGIN")
        conn.execute(INSERT_TASK, task_row(f"plain task {i}", now_ms))
        conn.execute("COMMIT")

    return Contender(name, synchronous_of(conn), lambda n: timed_calls(one, n))


def huey_enqueue(folder: Path) -> tuple[Contender, Any]:
    """huey's ``SqliteHuey`` at its default durability (``fsync`` unset: SQLite's
    compiled default, read back below); one enqueue is one task call. Returns the
    contender and the huey instance (to close)."""
    from huey import SqliteHuey

    huey = SqliteHuey(name="bench", filename=str(folder / "huey.db"))

    @huey.task()  # type: ignore[untyped-decorator]
    def noop(i: int) -> None:
        """The task body is never run here: enqueueing is what is measured."""

    noop(-1)  # creates the connection, so its pragmas can be read back
    durability = synchronous_of(huey.storage.conn) + " (huey default)"
    return Contender("huey SqliteHuey enqueue", durability, lambda n: timed_calls(noop, n)), huey


def persist_queue_put(folder: Path) -> tuple[Contender, Any]:
    """persist-queue's ``SQLiteAckQueue`` with ``auto_commit=True`` (one commit per
    put) at its default durability."""
    from persistqueue import SQLiteAckQueue

    queue = SQLiteAckQueue(str(folder / "persist-queue"), auto_commit=True)
    assert queue._putter is not None, "persist-queue opened no connection"
    durability = synchronous_of(queue._putter) + " (persist-queue default)"
    return Contender("persist-queue SQLiteAckQueue.put", durability, lambda n: timed_calls(queue.put, n)), queue


def litequeue_put(folder: Path) -> tuple[Contender, Any]:
    """litequeue's ``LiteQueue.put`` (autocommit: one commit per put). Its default is
    ``synchronous=NORMAL``; it is raised to FULL here to compare at equal durability."""
    from litequeue import LiteQueue

    queue = LiteQueue(str(folder / "litequeue.db"))
    queue.conn.execute("PRAGMA synchronous = FULL")
    durability = synchronous_of(queue.conn) + " (raised from its NORMAL default)"

    def one(i: int) -> None:
        queue.put(f'{{"subject": "litequeue task {i}"}}')

    return Contender("litequeue put", durability, lambda n: timed_calls(one, n)), queue


def huey_consumer(folder: Path) -> tuple[Contender, Any]:
    """huey's consumer loop in-process: ``Worker.loop()`` as the consumer calls it
    (dequeue, then ``huey.execute``: revocation checks, the task, the result
    stored). ``run(n)`` enqueues ``n`` no-op tasks untimed, then times each of
    ``n`` loops. ``fsync=True`` sets ``synchronous=FULL`` explicitly (equal
    durability; read back below). Returns the contender and the huey instance."""
    import threading

    from huey import SqliteHuey
    from huey.consumer import Worker

    huey = SqliteHuey(name="bench-consumer", filename=str(folder / "huey-consumer.db"), fsync=True)

    @huey.task()  # type: ignore[untyped-decorator]
    def noop(i: int) -> str:
        return "done"  # a value, so the result is stored as a real task's would be

    # The consumer's defaults: 0.1 s first idle delay, 10 s at most, backoff 1.15.
    worker = Worker(huey, threading.Event(), 0.1, 10.0, 1.15)

    def run(n: int) -> list[float]:
        for i in range(n):
            noop(i)
        latencies = timed_calls(lambda _i: worker.loop(), n)
        if huey.pending_count() or huey.result_count() < n:
            raise RuntimeError("huey left tasks unrun")
        huey.flush()  # results and revocation keys: every round starts from empty tables
        return latencies

    durability = synchronous_of(huey.storage.conn) + " (set: huey's fsync=True)"
    return Contender("huey consumer loop (SqliteHuey, Worker.loop)", durability, run), huey
