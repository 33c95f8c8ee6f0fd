"""The bot as a running service: inside ``vigil run`` (``chat_forever``, in the
process that holds dispatch lane 0) and alone (``serve_chat``, ``vigil chat
run``). The token is read here, from the variable ``token_env`` names, and passed
down in memory only.
"""

from __future__ import annotations

import asyncio
import logging
import os

from vigil.chat.pairing import record_health
from vigil.chat.telegram import TelegramChat
from vigil.clock import Clock
from vigil.config import Settings, TelegramSettings
from vigil.errors import InputError

log = logging.getLogger("vigil.chat")


def token_of(settings: TelegramSettings) -> str:
    """The bot token from ``token_env``; raises ``InputError`` when it is not set."""
    token = os.environ.get(settings.token_env, "").strip()
    if not token:
        raise InputError(f"{settings.token_env} is not set: put the bot's token from BotFather in it (docs/chat.md)")
    return token


async def chat_forever(settings: Settings, clock: Clock, stop: asyncio.Event) -> None:
    """The home's bot inside ``vigil run`` until ``stop``; returns at once without
    ``[chat.telegram]``. A missing token is logged and recorded, never raised: the
    loop runs on without the chat.

    The bot opens a store connection of its own: the dispatcher is woken by other
    connections' commits (``data_version``), not by its own, and a task a person
    approves or answers from the chat must start at once."""
    from vigil.store import open_store

    if settings.telegram is None:
        return
    store = await open_store(settings, clock)
    try:
        try:
            token = token_of(settings.telegram)
        except InputError as err:
            log.error("chat: %s", err)
            await record_health(store, "down", error=str(err), now_ms=clock.now_ms())
            return
        await TelegramChat(settings, store, clock, token).run(stop)
    finally:
        await store.close()


def configured_token(settings: Settings) -> str:
    """The bot token of a home with ``[chat.telegram]``; raises ``InputError``
    without the table or without the token."""
    if settings.telegram is None:
        raise InputError("no [chat.telegram] table in vigil.toml: see docs/chat.md")
    return token_of(settings.telegram)


async def serve_chat(settings: Settings, token: str) -> int:
    """``vigil chat run``: the bot alone until SIGTERM/SIGINT; returns the exit code (0)."""
    import signal

    from vigil.clock import SystemClock
    from vigil.store import open_store

    clock = SystemClock()
    store = await open_store(settings, clock)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        log.info("chat: the Telegram bot of %s is running", settings.home)
        await TelegramChat(settings, store, clock, token).run(stop)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await store.close()
    log.info("chat: stopped")
    return 0
