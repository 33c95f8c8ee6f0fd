"""``vigil events`` (the audit trail) and ``vigil stats`` (spend and tokens)."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import click

from vigil.cli.base import TASK_ID, with_store
from vigil.cli.root import main

if TYPE_CHECKING:  # imported inside the commands at run time: start-up stays light
    from vigil.config import Settings
    from vigil.models import TaskEvent
    from vigil.store import Store


@main.command("events")
@click.option("--since", metavar="TIME", help="Only events at or after TIME: ISO 8601, or a duration ago (2h, 1d).")
@click.option("--task", "task_id", type=TASK_ID, metavar="ID", help="Only this task's events.")
@click.option("--kind", "kinds", multiple=True, metavar="K", help="Only this kind (repeatable): created, status, …")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--follow", "-f", is_flag=True, help="Then print new events as they commit, until Ctrl-C.")
@click.pass_context
def events_command(ctx: click.Context, /, **opts: Any) -> None:
    """The audit trail of every task, in order: who changed what, from → to."""

    from vigil.clock import SystemClock
    from vigil.events import POSTGRES_LOOKBACK, EventFilter, parse_kinds, parse_since
    from vigil.events import stream_events as stream
    from vigil.render import dumps_line, event_line, event_record

    since, as_json, follow = opts["since"], opts["as_json"], opts["follow"]
    wanted = EventFilter(
        since_ms=None if since is None else parse_since(since, SystemClock().now_ms()),
        task_id=opts["task_id"],
        kinds=parse_kinds(opts["kinds"]),
    )

    def emit(event: TaskEvent) -> None:
        text = dumps_line(event_record(event)) if as_json else event_line(event)
        click.echo(text)  # flushed per line, so a follower's reader sees each at once

    def work(store: Store, settings: Settings) -> Awaitable[None]:
        lookback = 0 if settings.store.url is None else POSTGRES_LOOKBACK
        return stream(store, wanted, emit, follow=follow, lookback=lookback)

    try:
        with_store(ctx, work)
    except KeyboardInterrupt:
        sys.exit(0)  # Ctrl-C is how a follower ends: not an error
    except BrokenPipeError:
        # The reader went away (| head): stop quietly; point stdout at /dev/null so
        # the interpreter's own flush at exit does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)


@main.command()
@click.option("--since", default="7d", show_default=True, help="Window, e.g. 24h, 7d, 30d.")
@click.option(
    "--by",
    type=click.Choice(["day", "skill", "source", "sensor", "model", "account"]),
    default="day",
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def stats(ctx: click.Context, since: str, by: str, as_json: bool) -> None:
    """Spend and tokens of finished runs, grouped by day, skill, source, sensor, model or
    account; the budget's use; what is left of each agent CLI account."""
    from vigil.commands import cost_report

    click.echo(
        with_store(
            ctx, lambda store, settings: cost_report(store, since, by, as_json, settings.budget, settings=settings)
        )
    )
