"""``vigil sensors …``: list, run, skips, enable and disable the sensors of vigil.toml."""

from __future__ import annotations

import sys

import click

from vigil.cli.base import with_store
from vigil.cli.root import main


@main.group()
def sensors() -> None:
    """List, run, enable and disable the sensors of vigil.toml."""


@sensors.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def sensors_list(ctx: click.Context, as_json: bool) -> None:
    """Each sensor: schedule, enabled, last run, status, next due, created/ignored, failures, skipped runs."""
    from sensors.commands import list_sensors, sensors_table
    from vigil.render import dumps

    rows = with_store(ctx, list_sensors)
    click.echo(dumps(rows) if as_json else sensors_table(rows))


@sensors.command("run")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def sensors_run(ctx: click.Context, names: tuple[str, ...], as_json: bool) -> None:
    """Run the named sensors (default: every enabled one) once, now. Exits 1 if one failed."""
    from sensors.commands import reports_text, run_sensors

    reports = with_store(ctx, lambda store, settings: run_sensors(store, settings, names))
    click.echo(reports_text(reports, as_json))
    sys.exit(0 if all(r.ok for r in reports) else 1)


@sensors.command("skips")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def sensors_skips(ctx: click.Context, names: tuple[str, ...], as_json: bool) -> None:
    """The runs the named sensors (default: all) did not make, and why; newest first."""
    from sensors.commands import list_skips, skips_table
    from vigil.render import dumps

    rows = with_store(ctx, lambda store, settings: list_skips(store, settings, names))
    click.echo(dumps(rows) if as_json else skips_table(rows))


@sensors.command("enable")
@click.argument("name")
@click.pass_context
def sensors_enable(ctx: click.Context, name: str) -> None:
    """Let a sensor run on its schedule again."""
    from sensors.commands import set_enabled

    click.echo(with_store(ctx, lambda store, settings: set_enabled(store, settings, name, True)))


@sensors.command("disable")
@click.argument("name")
@click.pass_context
def sensors_disable(ctx: click.Context, name: str) -> None:
    """Stop a sensor from running on its schedule (vigil sensors run NAME still runs it)."""
    from sensors.commands import set_enabled

    click.echo(with_store(ctx, lambda store, settings: set_enabled(store, settings, name, False)))
