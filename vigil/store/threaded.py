"""The async face of the blocking store behaviours, shared by both backends.

Each method runs the blocking call whole in the store's worker thread (``_hop``):
one hop per unit of work, no transaction open across an await, and a cancelled
caller's transaction still runs to its commit or rollback. SQLite hops to its
connection's own thread, PostgreSQL to a thread that borrows a pooled session.

The methods are made from the blocking ones (``on_tasks(Tasks.add_task)``), so
an async method's parameters are its blocking twin's, checked by the type checker
against the ``Store`` protocol, and no forwarding body can drop an argument.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from vigil.store.dispatching import Dispatching
from vigil.store.state import State
from vigil.store.tasks import Tasks

P = ParamSpec("P")
T = TypeVar("T")
AsyncMethod = Callable[Concatenate["Hopping", P], Coroutine[Any, Any, T]]


class Hopping:
    """A store whose blocking calls run in its worker thread."""

    tasks: Tasks
    dispatching: Dispatching
    state: State

    async def _hop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in the store's worker thread (each store says how)."""
        raise NotImplementedError


def _hopping(behaviour: str, fn: Callable[..., T]) -> Callable[..., Coroutine[Any, Any, T]]:
    """An async method running ``fn`` on the store's ``behaviour`` object in its thread."""
    name = fn.__name__

    async def method(self: Hopping, /, *args: Any, **kwargs: Any) -> T:
        return await self._hop(getattr(getattr(self, behaviour), name), *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = fn.__doc__
    return method


def on_tasks(fn: Callable[Concatenate[Tasks, P], T]) -> AsyncMethod[P, T]:
    return _hopping("tasks", fn)


def on_dispatching(fn: Callable[Concatenate[Dispatching, P], T]) -> AsyncMethod[P, T]:
    return _hopping("dispatching", fn)


def on_state(fn: Callable[Concatenate[State, P], T]) -> AsyncMethod[P, T]:
    return _hopping("state", fn)


class AsyncTasks(Hopping):
    """The task methods of ``Store`` (see its docstrings), mixed into each backend's store."""

    add_task = on_tasks(Tasks.add_task)
    add_tasks = on_tasks(Tasks.add_tasks)
    add_each = on_tasks(Tasks.add_each)
    get_task = on_tasks(Tasks.get_task)
    list_tasks = on_tasks(Tasks.list_tasks)
    search_tasks = on_tasks(Tasks.search_tasks)
    queue = on_tasks(Tasks.queue)
    task_window = on_tasks(Tasks.task_window)
    finished_tasks = on_tasks(Tasks.finished_tasks)
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
    defer = on_tasks(Tasks.defer)
    defer_by = on_tasks(Tasks.defer_by)
    retry = on_tasks(Tasks.retry)
    close_task = on_tasks(Tasks.close_task)
    request_retry = on_tasks(Tasks.request_retry)
    add_note = on_tasks(Tasks.add_note)
    approve = on_tasks(Tasks.approve)
    reject = on_tasks(Tasks.reject)


class AsyncDispatching(Hopping):
    """The dispatch methods of ``Store`` (see its docstrings), mixed into each backend's store."""

    claim_next = on_dispatching(Dispatching.claim_next)
    set_run_process = on_dispatching(Dispatching.set_run_process)
    set_executor = on_dispatching(Dispatching.set_executor)
    renew_lease = on_dispatching(Dispatching.renew_lease)
    finish = on_dispatching(Dispatching.finish)
    finish_and_claim = on_dispatching(Dispatching.finish_and_claim)
    requeue = on_dispatching(Dispatching.requeue)
    hold_for_approval = on_dispatching(Dispatching.hold_for_approval)
    hold_for_review = on_dispatching(Dispatching.hold_for_review)
    release_unrun = on_dispatching(Dispatching.release_unrun)
    origin_of = on_dispatching(Dispatching.origin_of)
    spend_since = on_dispatching(Dispatching.spend_since)
    active_tasks = on_dispatching(Dispatching.active_tasks)
    open_runs = on_dispatching(Dispatching.open_runs)
    recover = on_dispatching(Dispatching.recover)


class AsyncState(Hopping):
    """The sensor-state and loop-state methods of ``Store`` (see its docstrings)."""

    sensor_states = on_state(State.sensor_states)
    sensor_state = on_state(State.sensor_state)
    record_sensor_run = on_state(State.record_sensor_run)
    set_sensor_enabled = on_state(State.set_sensor_enabled)
    loop_values = on_state(State.loop_values)
    set_loop_values = on_state(State.set_loop_values)
    replace_loop_value = on_state(State.replace_loop_value)
