"""The ``vigil`` group: its options, and how every command's errors become one
line on stderr and an exit code; ``vigil init``."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

from vigil.cli.base import CliState, fail
from vigil.distribution import DISTRIBUTION
from vigil.errors import VigilError


class VigilGroup(click.Group):
    """Maps Vigil errors and the parser's usage errors to one line and an exit
    code, for every command."""

    def main(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_undecodable(kwargs.get("args", args[0] if args else None))
        _refuse_unreadable_clock()
        kwargs["standalone_mode"] = False  # errors come back here instead of click's three lines
        try:
            code = super().main(*args, **kwargs)
        except click.UsageError as err:
            if _asks_for_help(err):
                # `vigil` or `vigil task` alone: the help a person was looking for,
                # on stdout as click formats it, not an error line
                click.echo(err.ctx.get_help())  # type: ignore[union-attr]
                sys.exit(0)
            hint = f" (see '{err.ctx.command_path} --help')" if err.ctx is not None else ""
            fail(err.format_message() + hint, 2)
        except click.ClickException as err:
            fail(err.format_message(), err.exit_code)
        except click.Abort:
            fail("aborted", 1)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except VigilError as err:
            fail(str(err), err.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", 130)


def _asks_for_help(err: click.UsageError) -> bool:
    """Whether ``err`` is a group given no command (``vigil``, ``vigil --home DIR``,
    ``vigil task``): click raises its no-arguments error, or, after options, its
    "Missing command" usage error."""
    if isinstance(err, click.exceptions.NoArgsIsHelpError):
        return True
    return err.ctx is not None and isinstance(err.ctx.command, click.Group) and err.message == "Missing command."


def _refuse_undecodable(argv: Any) -> None:
    """Exit 2 naming the first argument that is not UTF-8: Python hands such bytes
    over as lone surrogates, which no file, database or terminal can take."""
    for number, arg in enumerate(sys.argv[1:] if argv is None else argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raw = os.fsencode(arg)
            fail(f"argument {number} ({raw[:40].decode('ascii', 'backslashreplace')}) is not valid UTF-8 text")


def _refuse_unreadable_clock() -> None:
    """Exit 1 when the system clock reads past what Python can hold (2262-04-11, the
    limit of 64-bit nanoseconds): every ``time.time()`` then raises, logging's first."""
    try:
        time.time()
        time.monotonic()
    except OverflowError:
        fail("the system clock reads a time past 2262-04-11, which Python cannot represent; set it right", 1)


@click.group(cls=VigilGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", metavar="DIR", help="Home folder (default: $VIGIL_HOME, else the nearest vigil.toml upwards).")
@click.version_option(package_name=DISTRIBUTION)
@click.pass_context
def main(ctx: click.Context, home: str | None) -> None:
    """Vigil keeps an autonomous agent working 24/7 from one SQLite file."""
    ctx.obj = CliState(home_arg=home)


@main.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False, path_type=Path))
def init(directory: Path) -> None:
    """Make DIRECTORY a new home: vigil.toml (dry-run executor, history kept 90 days,
    a $10 daily budget), skills/, logs/."""
    from vigil.home import init_home

    for path in init_home(directory, safe_defaults=True):
        click.echo(f"created {path}")
    click.echo(f"next: vigil --home {directory} task add 'my first task'")
