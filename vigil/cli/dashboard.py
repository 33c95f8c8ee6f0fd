"""``vigil tui``: the live dashboard, in this terminal or served to browsers."""

from __future__ import annotations

import re

import click

from vigil.cli.base import person_only, settings_for
from vigil.cli.root import main
from vigil.errors import InputError
from vigil.printable import printable


@main.command("tui")
@click.option("--readonly", is_flag=True, help="Watch only: hide every action that writes.")
@click.option("--with-loop", is_flag=True, help="Also run the loop (vigil run) as a background process.")
@click.option("--task", "task_id", type=click.IntRange(min=1), metavar="ID", help="Open on task ID's screen.")
@click.option("--serve", is_flag=True, help="Serve the dashboard to browsers, behind a token (docs/tui.md).")
@click.option("--host", help="With --serve: the address to listen on (default: [serve] host, 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65535), help="With --serve: the port (default: [serve] port, 8377).")
@click.option("--public-url", metavar="URL", help="With --serve: the address browsers open (a proxy, a tunnel).")
@click.option("--print-url", is_flag=True, help="With --serve: print the link to open, token included, and exit.")
@click.option("--rotate-token", is_flag=True, help="With --serve: make a new token; old links stop working.")
@click.option("--browser-session", hidden=True)  # set by --serve for each browser tab's app
@click.pass_context
def tui_command(
    ctx: click.Context,
    *,
    readonly: bool,
    with_loop: bool,
    task_id: int | None,
    serve: bool,
    host: str | None,
    port: int | None,
    public_url: str | None,
    print_url: bool,
    rotate_token: bool,
    browser_session: str | None,
) -> None:
    """Open the live dashboard to watch the queue and steer it (quit: ctrl+q), or
    serve it to browsers (--serve)."""
    from tui import run_tui

    served = {"--host": host, "--port": port, "--public-url": public_url, "--print-url": print_url}
    served |= {"--rotate-token": rotate_token}
    if not serve and any(served.values()):
        raise InputError(f"{next(k for k, v in served.items() if v)} goes with --serve")
    if browser_session is not None and not re.fullmatch(r"[0-9a-z]{1,32}", browser_session):
        raise InputError("--browser-session: expected up to 32 lowercase letters and digits")
    if serve and (with_loop or browser_session or task_id):
        raise InputError("--serve starts no loop and opens no task: run `vigil run` beside it; links open tasks")
    if readonly and with_loop:
        raise InputError("--readonly and --with-loop exclude each other: a read-only TUI starts nothing")
    if not readonly and not print_url:
        person_only("steer the queue from the TUI (use --readonly to watch)")
    settings = settings_for(ctx)
    if readonly and settings.store.url is None and not settings.store.path.exists():
        raise InputError(f"no database at {settings.store.path}; --readonly does not create one")
    if serve:
        from tui.serving import run_serve

        person_only("serve the dashboard")  # the token is a person's key
        lines = run_serve(
            settings,
            host=host,
            port=port,
            public_url=public_url,
            readonly=readonly,
            print_url=print_url,
            rotate_token=rotate_token,
        )
        for line in lines:
            click.echo(line)
        return
    message = run_tui(settings, readonly=readonly, with_loop=with_loop, session=browser_session, task_id=task_id)
    if message:
        click.echo(printable(message))
