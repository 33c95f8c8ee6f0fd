"""``vigil chat …``: the Telegram bot (docs/chat.md)."""

from __future__ import annotations

import click

from vigil.cli.base import person_only, settings_for, with_store
from vigil.cli.root import main
from vigil.errors import InputError


@main.group("chat")
def chat_group() -> None:
    """The Telegram bot: answer, approve and steer from a chat."""


@chat_group.command("pair")
@click.pass_context
def chat_pair(ctx: click.Context) -> None:
    """Print a one-time code; the chat that sends it to the bot becomes the one allowed."""
    from vigil.chat.pairing import CODE_TTL_MS, start_pairing
    from vigil.clock import SystemClock

    person_only("pair a chat")
    settings = settings_for(ctx)
    if settings.telegram is None:
        raise InputError("no [chat.telegram] table in vigil.toml: see docs/chat.md")
    telegram = settings.telegram
    code = with_store(ctx, lambda store, _: start_pairing(store, telegram, SystemClock().now_ms()))
    click.echo(
        f"Send this to your bot within {CODE_TTL_MS // 60_000} minutes (vigil run or vigil chat run must be up):"
    )
    click.echo(code)


@chat_group.command("unpair")
@click.pass_context
def chat_unpair(ctx: click.Context) -> None:
    """Forget the paired chat: from now on no chat can act until one pairs again."""
    from vigil.chat.pairing import unpair

    person_only("unpair the chat")
    forgot = with_store(ctx, lambda store, _: unpair(store))
    click.echo("no chat was paired" if forgot is None else f"chat {forgot} unpaired: it can no longer act")


@chat_group.command("run")
@click.pass_context
def chat_run(ctx: click.Context) -> None:
    """Run the bot alone, until Ctrl-C (vigil run runs it too)."""
    import asyncio

    from vigil.chat.service import configured_token, serve_chat
    from vigil.daemon import configure_logging

    settings = settings_for(ctx)
    token = configured_token(settings)  # a missing token is said before anything starts
    configure_logging(settings)
    ctx.exit(asyncio.run(serve_chat(settings, token)))
