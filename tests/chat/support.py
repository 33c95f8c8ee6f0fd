"""The bot of a test home, running in the test's event loop against the scripted
Bot API (``tests.chat.bot_api``); what the tests wait for and read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.chat.bot_api import TOKEN, BotApi
from vigil.chat.telegram import TelegramChat
from vigil.clock import SystemClock
from vigil.config import Settings, load_settings
from vigil.models import NewTask, Outcome, OutcomeKind
from vigil.store import Store

PERSON = 4242  # the paired chat (a private chat: its id is the person's user id)
STRANGER = 666  # anybody else who found the bot
WAIT_S = 60.0  # generous: the machine is loaded; never a wall-clock assertion


def chat_toml(api: BotApi, *, chat_id: int | None = PERSON, extra: str = "") -> str:
    """The ``[chat.telegram]`` table of a test home: the scripted API, a short long
    poll and a short retry after Telegram was unreachable."""
    pinned = "" if chat_id is None else f"chat_id = {chat_id}\n"
    return f'\n[chat.telegram]\napi_url = "{api.base_url}"\npoll = "1s"\nretry = "1s"\n{pinned}{extra}'


def chat_settings(home: Path, api: BotApi, *, chat_id: int | None = PERSON) -> Settings:
    with (home / "vigil.toml").open("a") as config:
        config.write(chat_toml(api, chat_id=chat_id))
    return load_settings(home)


async def until(condition: Callable[[], object], what: str, timeout_s: float = WAIT_S) -> None:
    """Wait until ``condition()`` is true, polling."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        await asyncio.sleep(0.05)


async def until_async(condition: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> None:
    """``until`` for a coroutine condition (a store read)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        await asyncio.sleep(0.05)


@asynccontextmanager
async def running_bot(settings: Settings, store: Store) -> AsyncIterator[None]:
    """The home's bot, polling the scripted API, stopped on exit."""
    stop = asyncio.Event()
    chat = TelegramChat(settings, store, SystemClock(), TOKEN)
    bot = asyncio.create_task(chat.run(stop))
    try:
        await asyncio.wait_for(chat.feed.following.wait(), WAIT_S)  # what happens from now on is sent
        yield
    finally:
        stop.set()
        await asyncio.wait_for(bot, WAIT_S)


def cards_to(api: BotApi, chat_id: int, containing: str) -> list[dict[str, Any]]:
    """The messages the bot sent to ``chat_id`` whose text contains ``containing``."""
    return [m for m in list(api.sent) if m["chat"]["id"] == chat_id and containing in m["text"]]


async def card(api: BotApi, containing: str, chat_id: int = PERSON) -> dict[str, Any]:
    """Wait for the bot's message containing ``containing``; the latest one."""
    await until(lambda: cards_to(api, chat_id, containing), f"a message with {containing!r}")
    return cards_to(api, chat_id, containing)[-1]


async def waiting_task(store: Store, subject: str, question: str, choices: tuple[str, ...] = ()) -> int:
    """A task whose agent asked ``question`` in its run (as Vigil's ``ask`` does)."""
    task_id = (await store.add_task(NewTask(subject))).task_id
    assert task_id is not None
    claim = await store.claim_next(worker="d", lease_ms=60_000)
    assert claim is not None
    await store.ask(task_id, question, choices, actor="agent")
    await store.record(claim, Outcome(OutcomeKind.SUCCESS, summary="asked"), worker="d")
    assert (await store.get_task(task_id)).status == "waiting"
    return task_id


async def reviewed_task(store: Store, subject: str) -> int:
    """A task whose run succeeded and now awaits a person's review."""
    task_id = (await store.add_task(NewTask(subject))).task_id
    assert task_id is not None
    claim = await store.claim_next(worker="d", lease_ms=60_000)
    assert claim is not None
    await store.record(claim, Outcome(OutcomeKind.SUCCESS, summary="did it", review=True), worker="d")
    assert (await store.get_task(task_id)).awaiting_review
    return task_id


async def failed_task(store: Store, subject: str) -> int:
    """A task that failed for good (no retries left)."""
    task_id = (await store.add_task(NewTask(subject, max_retries=0))).task_id
    assert task_id is not None
    claim = await store.claim_next(worker="d", lease_ms=60_000)
    assert claim is not None
    await store.record(claim, Outcome(OutcomeKind.FAILED, summary="it broke"), worker="d")
    assert (await store.get_task(task_id)).status == "failed"
    return task_id
