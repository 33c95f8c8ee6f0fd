"""``Store``: the store every backend is, and the one signature of each behaviour.

A behaviour is written once, as a blocking method of ``Tasks``, ``Dispatching`` or
``State`` (one transaction on a ``Tx``), whose docstring states what it returns,
raises and guarantees. ``Store`` turns each into an async method
(``on_tasks(Tasks.add_task)``: the same parameters, checked by the type checker, and
the same docstring) that runs the blocking call whole in the store's worker thread
(``_hop``, each backend's own): one hop per unit of work, no transaction open across
an await, and a cancelled caller's transaction still runs to its commit or rollback.

What a backend does itself is declared here and written there: ``close``,
``data_version``, ``backup``, ``checkpoint``. ``prune`` is shared
(``pruning.AsyncRetention``).

Every method raises only ``vigil.errors`` types. ``actor`` names who asked
(``human``, ``agent``, ``dispatcher``, ``sensor:<name>``) and is written to the
audit trail.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vigil.clock import Clock
from vigil.config import LimitsSettings
from vigil.store.dispatching import Dispatching
from vigil.store.pruning import AsyncRetention
from vigil.store.state import State
from vigil.store.tasks import Tasks
from vigil.store.threaded import on_dispatching, on_state, on_tasks
from vigil.store.transaction import Engine


class Store(AsyncRetention):
    """Every behaviour of the store, async. Backends: ``SqliteStore`` (the embedded
    default), ``PostgresStore``; open the configured one with ``open_store``."""

    def _behave_on(
        self,
        engine: Engine,
        clock: Clock,
        default_max_retries: int,
        limits: LimitsSettings | None,
        pass_env: Sequence[str],
    ) -> None:
        """Make the blocking behaviours over a backend's ``engine`` (the async methods
        run them in ``_hop``)."""
        self.engine = engine
        self._clock = clock
        self.tasks = Tasks(engine, clock, default_max_retries, limits, pass_env=pass_env)
        self.dispatching = Dispatching(engine, clock)
        self.state = State(engine, clock, default_max_retries, limits)

    # what the tasks side does: add, change, read
    add_task = on_tasks(Tasks.add_task)
    add_tasks = on_tasks(Tasks.add_tasks)
    add_each = on_tasks(Tasks.add_each)
    get_task = on_tasks(Tasks.get_task)
    list_tasks = on_tasks(Tasks.list_tasks)
    task_window = on_tasks(Tasks.task_window)
    finished_tasks = on_tasks(Tasks.finished_tasks)
    search_tasks = on_tasks(Tasks.search_tasks)
    queue = on_tasks(Tasks.queue)
    count_by_status = on_tasks(Tasks.count_by_status)
    next_due_at = on_tasks(Tasks.next_due_at)
    get_run = on_tasks(Tasks.get_run)
    attention = on_tasks(Tasks.attention)
    list_runs = on_tasks(Tasks.list_runs)
    list_events = on_tasks(Tasks.list_events)
    events_after = on_tasks(Tasks.events_after)
    list_notes = on_tasks(Tasks.list_notes)
    dependencies = on_tasks(Tasks.dependencies)
    cost_rollup = on_tasks(Tasks.cost_rollup)
    cancel = on_tasks(Tasks.cancel)
    set_priority = on_tasks(Tasks.set_priority)
    shift_priority = on_tasks(Tasks.shift_priority)
    defer = on_tasks(Tasks.defer)
    defer_by = on_tasks(Tasks.defer_by)
    retry = on_tasks(Tasks.retry)
    close_task = on_tasks(Tasks.close_task)
    request_retry = on_tasks(Tasks.request_retry)
    add_note = on_tasks(Tasks.add_note)
    approve = on_tasks(Tasks.approve)
    reject = on_tasks(Tasks.reject)
    ask = on_tasks(Tasks.ask)
    answer = on_tasks(Tasks.answer)
    unblock = on_tasks(Tasks.unblock)

    # what the dispatcher does: claim, renew, record, put back, recover
    claim_next = on_dispatching(Dispatching.claim_next)
    set_run_process = on_dispatching(Dispatching.set_run_process)
    set_worktree = on_dispatching(Dispatching.set_worktree)
    set_github = on_dispatching(Dispatching.set_github)
    set_executor = on_dispatching(Dispatching.set_executor)
    renew_lease = on_dispatching(Dispatching.renew_lease)
    record = on_dispatching(Dispatching.record)
    put_back = on_dispatching(Dispatching.put_back)
    origin_of = on_dispatching(Dispatching.origin_of)
    spend_since = on_dispatching(Dispatching.spend_since)
    active_tasks = on_dispatching(Dispatching.active_tasks)
    open_runs = on_dispatching(Dispatching.open_runs)
    recover = on_dispatching(Dispatching.recover)

    # sensors' state and the loop's key/value state
    sensor_states = on_state(State.sensor_states)
    sensor_state = on_state(State.sensor_state)
    record_sensor_run = on_state(State.record_sensor_run)
    set_sensor_enabled = on_state(State.set_sensor_enabled)
    loop_values = on_state(State.loop_values)
    set_loop_values = on_state(State.set_loop_values)
    replace_loop_value = on_state(State.replace_loop_value)
    record_sensor_skip = on_state(State.record_sensor_skip)

    async def data_version(self) -> int:
        """A number that changes whenever another process (or connection) commits to
        the store: the cheap "did anything change?" probe the idle loop and the TUI
        poll."""
        raise NotImplementedError

    async def backup(self, target: Path) -> None:
        """Write a consistent copy of the database to ``target`` (online backup)."""
        raise NotImplementedError

    async def checkpoint(self, *, truncate: bool = False) -> tuple[int, int]:
        """Copy the write-ahead log into the database without waiting for readers
        (passive). Returns (pages in the log, pages copied); fewer copied than
        logged means a reader still holds an older snapshot. SQLite-specific in
        spirit; another backend returns (0, 0).

        ``truncate`` also empties the log file: it waits up to a short bound
        (``sqlite.db.TRUNCATE_WAIT_MS``) for the readers of older snapshots to
        finish, holding off other writers meanwhile, then copies every page and
        cuts the file to zero bytes, returning (0, 0). A reader still there at the
        bound leaves the log as a passive checkpoint would (the counts say so).
        Under readers that never pause, only this bounds the log."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""
        raise NotImplementedError
