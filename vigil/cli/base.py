"""What every command uses: the home's settings and store (``settings_for``,
``with_store``, ``with_tasks``), the error line (``fail``), who is asking
(``actor``, ``person_only``), bounded numbers and coloured verdicts."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from vigil.errors import InputError
from vigil.models import MAX_ID
from vigil.printable import printable

if TYPE_CHECKING:  # imported inside the commands at run time: start-up stays light
    from vigil.config import Settings
    from vigil.store import Store
    from vigil.store.tasks import Tasks

T = TypeVar("T")


class Bounded(click.types.IntParamType):
    """An integer from ``low`` to ``high``. Every number the CLI takes is bounded (a
    task id by the database's 64-bit ids), so that a number beyond is a usage error,
    not an overflow deep in the driver."""

    def __init__(self, low: int, high: int, what: str) -> None:
        self.low, self.high, self.what = low, high, what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number: int = super().convert(value, param, ctx)  # "… is not a valid integer."
        if not self.low <= number <= self.high:
            self.fail(f"{number} is not {self.what} (an integer from {self.low} to {self.high})", param, ctx)
        return number


TASK_ID = Bounded(1, MAX_ID, "a task id")
MAX_LIST_LIMIT = 1_000_000


@dataclass
class CliState:
    home_arg: str | None


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"vigil: error: {printable(message, keep_newlines=False)}", err=True)
    sys.exit(code)


def colour_wanted() -> bool:
    """Colour only for a person's terminal: stdout is one and NO_COLOR
    (no-color.org) is unset or empty. Pipes, files and scripts get plain text."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def echo_verdicts(text: str) -> None:
    """Print ``text``, its verdict words (FAIL, DIED, PAUSED …) coloured when
    ``colour_wanted``."""
    from vigil.render import coloured

    click.echo(coloured(text) if colour_wanted() else text)


def actor() -> str:
    """Who is asking: the agent (inside a run) or a person."""
    return "agent" if os.environ.get("VIGIL_TASK_ID") else "human"


def settings_for(ctx: click.Context) -> Settings:
    """Find the home and load its settings."""
    from vigil.config import load_settings
    from vigil.home import find_home

    state: CliState = ctx.find_object(CliState)  # type: ignore[assignment]
    return load_settings(find_home(state.home_arg))


def with_store(ctx: click.Context, work: Callable[[Store, Settings], Awaitable[T]]) -> T:
    """Open the home's store, run ``work(store, settings)`` in one ``asyncio.run``."""
    settings = settings_for(ctx)

    import asyncio

    async def main() -> T:
        from vigil.store import open_store

        store = await open_store(settings)
        try:
            return await work(store, settings)
        finally:
            await store.close()

    return asyncio.run(main())


def with_tasks(ctx: click.Context, work: Callable[[Tasks, Settings], T]) -> T:
    """Run ``work(tasks, settings)`` on the home's store's blocking task methods
    (``vigil.store.tasks.Tasks``): on SQLite no event loop and no thread."""
    from vigil.store import task_desk

    settings = settings_for(ctx)
    with task_desk(settings) as tasks:
        return work(tasks, settings)


def person_only(what: str) -> None:
    """Refuse inside a task run: the agent must not lift its own guardrails."""
    if actor() != "human":
        raise InputError(f"only a person can {what} (this command runs inside task #{os.environ['VIGIL_TASK_ID']})")
