"""Async methods made from the blocking store behaviours, for ``Store`` (``base``).

Each runs the blocking call whole in the store's worker thread (``Hopping._hop``):
SQLite hops to its connection's own thread, PostgreSQL to a thread that borrows a
pooled session. Being made from the blocking twin (``on_tasks(Tasks.add_task)``),
an async method has its parameters, checked by the type checker, and its docstring,
and no forwarding body can drop an argument.
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
