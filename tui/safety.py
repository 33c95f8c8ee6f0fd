"""Errors in handlers, timers and workers are shown and logged, never fatal.

``guarded`` wraps a handler so that an unexpected exception becomes an error
notification and a log record (``vigil.tui`` logger, written to logs/tui.log by the
app) instead of ending the app. ``VigilError`` messages are shown as they are: they
are written for people.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

from textual.dom import DOMNode

from tui.context import log
from vigil.errors import VigilError

F = TypeVar("F", bound=Callable[..., Any])


def report(node: DOMNode, err: BaseException, what: str) -> None:
    """Show ``err`` as a notification and log it (with the traceback if unexpected)."""
    if isinstance(err, VigilError):
        log.warning("%s: %s", what, err)
        message = str(err)
    else:
        log.error("%s failed", what, exc_info=err)
        message = f"{what} failed: {type(err).__name__}: {err}"
    try:
        node.app.notify(message, title="error", severity="error", timeout=8, markup=False)
    except Exception:
        log.debug("could not show an error notification", exc_info=True)


def guarded(what: str) -> Callable[[F], F]:
    """Decorate a method of a ``DOMNode`` (sync or async) so it cannot raise."""

    def decorate(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(self: DOMNode, *args: Any, **kwargs: Any) -> Any:
                try:
                    return await fn(self, *args, **kwargs)
                except Exception as err:
                    report(self, err, what)
                    return None

            return cast(F, run_async)

        @functools.wraps(fn)
        def run(self: DOMNode, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, *args, **kwargs)
            except Exception as err:
                report(self, err, what)
                return None

        return cast(F, run)

    return decorate


def guard_handlers(cls: type[DOMNode], prefixes: tuple[str, ...] = ("action_", "on_")) -> None:
    """Wrap the class's own ``action_*`` and ``on_*`` methods with ``guarded``, so a
    key or message handler that fails shows the error instead of ending the app.
    (Handlers registered with ``@on`` are guarded explicitly where they can fail.)"""
    for name, value in list(vars(cls).items()):
        if callable(value) and name.startswith(prefixes) and not getattr(value, "_vigil_guarded", False):
            wrapped = guarded(name.removeprefix("action_").removeprefix("on_").replace("_", " "))(value)
            wrapped._vigil_guarded = True
            setattr(cls, name, wrapped)
