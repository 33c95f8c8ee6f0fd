"""What every store behaviour is written against, whatever the backend.

A behaviour (add a task, cancel it, record a sensor run …) is a plain function of a
``Tx``: one open transaction, or an autocommit session for a read, of a blocking
connection. It runs the backend's SQL by name (``tx.q.SQL_ADD_TASK``), so it is
written once; each backend supplies its connection, its dialect of each query
(``sqlite_queries``, ``postgres_queries``: same names, same named parameters) and
the few statements that genuinely differ.

An ``Engine`` runs a behaviour in a transaction (``write``) or a read session
(``read``), retrying the whole body when the database stays busy. A one-shot
command calls it directly; the async stores run each whole call in a worker thread,
one hop per unit of work.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from vigil.models import CostGroup, TaskStatus
from vigil.store.rows import Row
from vigil.store.sql.window import WindowDialect

T = TypeVar("T")
Params = Mapping[str, Any]


class PruneQueries(Protocol):
    """The SQL of ``Store.prune`` (``pruning``), in ``sqlite_retention`` and
    ``postgres_retention``."""

    SQL_PRUNE_WALK: str
    SQL_PRUNABLE: str
    SQL_ARCHIVE_RUNS: str
    SQL_PRUNE_COUNTS: str
    SQL_RETIRE_KEYS: str
    SQL_PRUNE_TASKS: str
    SQL_EVENTS_WALK: str
    SQL_DELETE_EVENTS: str
    SQL_PRUNE_PREVIEW: str
    SQL_ARCHIVE_PREVIEW: str
    SQL_DROP_COSTS: str
    FOLD_HOURS: tuple[str, ...]  # run in order; the last one's row count is the rows moved
    SQL_DROP_KEYS: str


class Queries(Protocol):
    """The SQL both backends name alike (their queries modules are the implementations).

    Parameters are named (``:name`` on SQLite, ``%(name)s`` on PostgreSQL) and the
    same on both; ``now`` is always the store clock's epoch ms.
    """

    prune: PruneQueries
    SQL_GET_TASK: str
    SQL_ADD_TASK: str
    SQL_ADD_TASK_EVER: str
    SQL_ADD_DEP: str
    SQL_HOLDER_OF_KEY: str
    SQL_SEND_BACK: str
    SQL_CANCEL: str
    SQL_SET_PRIORITY: str
    SQL_DEFER: str
    SQL_RETRY: str
    SQL_CLOSE_TASK: str
    SQL_CLOSE_RUN: str
    SQL_ADD_NOTE: str
    SQL_APPROVE: str
    SQL_REJECT: str
    SQL_LIST_RUNS: str
    SQL_LIST_EVENTS: str
    SQL_LIST_NOTES: str
    SQL_DEPENDENCIES: str
    SQL_QUEUE: str
    SQL_NEXT_DUE_ID: str
    SQL_DEFER_BY: str
    WINDOW: WindowDialect
    SQL_COUNT_BY_STATUS: str
    SQL_NEXT_DUE_AT: str
    SQL_SEARCH_TASKS: str
    SQL_EVENTS_AFTER: str
    SQL_REQUEST_RETRY: str
    SQL_COST_ROLLUP: dict[CostGroup, str]
    SQL_FOLLOW_UP_DEPTH: str
    SQL_COUNT_CHILDREN: str
    SQL_COUNT_SOURCE_SINCE: str
    SQL_RECORD_REFUSAL: str
    SQL_LOCK_COUNT: str | None  # None: writers are serialised already
    SQL_GET_RUN: str
    SQL_ATTENTION: str
    SQL_SET_RUN_PROCESS: str
    SQL_APPROVE_REVIEW: str
    SQL_ADD_EVENT: str
    SQL_SET_WORKTREE: str
    SQL_SET_GITHUB: str
    SQL_ASK: str
    SQL_ANSWER: str
    SQL_UNBLOCK: str
    SQL_REJECT_REVIEW: str
    SQL_SET_RUN_EXECUTOR: str
    SQL_SET_TASK_EXECUTOR: str
    SQL_RENEW_LEASE: str
    SQL_RECORD_RUN: str
    SQL_ADD_COSTS: str
    SQL_RELEASE_CLOSED: str
    SQL_REOPEN_AGENT_CLOSED: str
    SQL_DROP_OPEN_RUN: str
    SQL_SPEND_SINCE: str
    SQL_ORIGIN_OF: str
    SQL_ACTIVE_TASKS: str
    SQL_OPEN_RUNS: str
    SQL_GET_RUN_FOR_UPDATE: str
    SQL_TASK_FOR_UPDATE: str
    SQL_SETTLE: str
    SQL_CLAIM_RUN_OPEN: str
    SQL_SENSOR_STATES: str
    SQL_SENSOR_STATE: str
    SQL_RECORD_SENSOR_RUN: str
    SQL_SENSOR_SKIPS: str
    SQL_SET_SENSOR_SKIPS: str
    SQL_SET_SENSOR_ENABLED: str
    SQL_LOOP_VALUES: str
    SQL_SET_LOOP_VALUE: str

    def claim(self, tx: Tx, params: dict[str, Any]) -> tuple[Row, Row] | None:
        """Claim the most urgent due task with priority ≤ ``max_priority`` (params:
        ``now``, ``worker``, ``lease_until``, ``executor``, ``max_priority``) and open
        its run, in the caller's transaction: the task's row and the run's (``id``,
        ``attempt``); None: none due."""
        ...

    def replace_loop_value(self, tx: Tx, key: str, expected: object, value: object) -> bool:
        """Write ``value`` under ``key`` only if its JSON value equals ``expected``
        (None: absent), in the caller's transaction; whether it wrote."""
        ...

    def list_tasks_sql(self, statuses: Collection[TaskStatus]) -> str:
        """Tasks of ``statuses`` newest first, keyset-paged (``before_id``, ``limit``)."""
        ...

    def search_tasks_sql(self, statuses: Collection[TaskStatus]) -> str:
        """``SQL_SEARCH_TASKS`` for ``statuses`` (``statuses``, ``before_id``,
        ``pattern``, ``limit``)."""
        ...


class Tx(Protocol):
    """One transaction (or read session) of a blocking connection."""

    @property
    def q(self) -> Queries:
        """The backend's SQL."""
        ...

    def one(self, sql: str, params: Params | None = None) -> Row | None:
        """The first row of ``sql``, or None."""
        ...

    def all(self, sql: str, params: Params | None = None) -> Sequence[Row]: ...

    def run(self, sql: str, params: Params | None = None) -> int:
        """Execute ``sql``; the number of rows it changed."""
        ...

    def many(self, sql: str, rows: Iterable[Params]) -> None:
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

    @property
    def q(self) -> Queries:
        """The backend's SQL."""
        ...

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
