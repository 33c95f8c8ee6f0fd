"""The Telegram bot: long polling through python-telegram-bot (no open port), one
chat allowed to act (``vigil.chat.pairing``), cards for each moment a person is
needed (``vigil.chat.cards``), and a person's replies, buttons and commands turned
into the CLI's operations (``vigil.chat.actions``).

Two loops share one ``Bot``: the poller reads updates (``getUpdates``) and acts
on them; the card sender follows the audit trail (``Store.events_after``, about
once a second, from its stored cursor) and the gate. When Telegram cannot be
reached either loop records the chat as down (``vigil status`` says so), waits
``[chat.telegram] retry`` and tries again; the card sender does not move its
cursor past a card it could not send, so the bot catches up when Telegram is back,
skipping tasks that moved on meanwhile. Nothing here ever stops the dispatch loop.

The token lives in this process's memory only: every text this module logs or
records has it masked, and python-telegram-bot's and httpx's own loggers are kept
at WARNING (httpx logs each request's URL, which holds the token).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import replace

from telegram import (
    Bot,
    CallbackQuery,
    ForceReply,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
    User,
)
from telegram.error import BadRequest, RetryAfter, TelegramError
from telegram.request import HTTPXRequest

from vigil.chat import actions
from vigil.chat.cards import (
    Button,
    Card,
    approval_card,
    confirm_card,
    failed_card,
    gate_card,
    pages,
    press_data,
    question_card,
    read_press,
    read_reference,
    reason_prompt,
    review_card,
)
from vigil.chat.pairing import Cursor, allowed_chat, code_in, read_cursor, record_health, save_cursor, try_pair
from vigil.clock import Clock
from vigil.config import Settings, TelegramSettings
from vigil.errors import InputError, VigilError
from vigil.gate import GateState, read_gate
from vigil.models import MAX_ID, Task, TaskEvent
from vigil.printable import printable
from vigil.store import Store

log = logging.getLogger("vigil.chat")

SCAN_S = 1.0  # how often the card sender reads the audit trail and the gate
BATCH = 100  # audit rows per read
QUIET_LOGGERS = ("telegram", "httpx", "httpcore")
HELP = (
    "Vigil's bot. Reply to a question to answer it; use the buttons on a card.\n"
    "/status  the loop and the queue\n"
    "/add <subject>  add a task\n"
    "/pause [reason]  /resume  the loop\n"
    "/answer N <text>  answer task N's question\n"
    "/diff N  task N's diff"
)


def token_of(settings: TelegramSettings) -> str:
    """The bot token from ``token_env``; raises ``InputError`` when it is not set."""
    token = os.environ.get(settings.token_env, "").strip()
    if not token:
        raise InputError(f"{settings.token_env} is not set: put the bot's token from BotFather in it (docs/chat.md)")
    return token


def actor_of(user: User | None) -> str:
    """Who acted, for the audit trail: ``human via telegram @name (id)``."""
    if user is None:
        return "human via telegram"
    name = f"@{user.username}" if user.username else user.full_name
    return f"human via telegram {printable(name, keep_newlines=False)[:64]} ({user.id})"


def flagged_files(task: Task) -> tuple[str, ...]:
    """The files a review card flags for a careful look. The one place to wire the
    stored review artifact's flagged list (issue 32) when it lands: empty today."""
    del task
    return ()


def _task_number(text: str) -> int | None:
    """A task id as a person typed it (``12``), or None."""
    value = int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else 0
    return value if 0 < value <= MAX_ID else None


def _markup(card: Card) -> InlineKeyboardMarkup | ForceReply | None:
    if card.force_reply:
        return ForceReply()
    if not card.buttons:
        return None
    rows = [[InlineKeyboardButton(b.label, callback_data=b.data) for b in row] for row in card.buttons]
    return InlineKeyboardMarkup(rows)


class TelegramChat:
    """The bot of one home; ``run`` until cancelled or ``stop``."""

    def __init__(self, settings: Settings, store: Store, clock: Clock, token: str) -> None:
        assert settings.telegram is not None
        self._settings = settings
        self._tg = settings.telegram
        self._store = store
        self._clock = clock
        self._token = token
        self._home = settings.home.name
        poll_s = self._tg.poll_ms / 1000
        self._bot = Bot(
            token,
            base_url=self._tg.api_url,
            request=HTTPXRequest(connect_timeout=5.0, read_timeout=15.0, write_timeout=15.0),
            get_updates_request=HTTPXRequest(connect_timeout=5.0, read_timeout=5.0 + poll_s),
        )
        self._ignored: set[int] = set()  # chats whose updates were ignored (and logged once)
        self._up: bool | None = None  # what was last recorded
        self.following = asyncio.Event()  # set once the card sender knows where it starts from

    # --- health -----------------------------------------------------------------
    def _mask(self, text: str) -> str:
        return text.replace(self._token, "***")

    async def _health(self, up: bool, error: str | None = None) -> None:
        if self._up is up:
            return
        self._up = up
        if up:
            log.info("telegram: reached")
        else:
            log.warning("telegram unreachable: %s; trying again in %gs", error, self._tg.retry_ms / 1000)
        try:
            await record_health(self._store, up=up, error=error, now_ms=self._clock.now_ms())
        except VigilError as err:
            log.warning("could not record the chat's health: %s", err)

    async def _down(self, err: TelegramError) -> None:
        """Telegram failed: recorded, then a wait of ``retry`` (or what it asked for)."""
        wait_s = self._tg.retry_ms / 1000
        if isinstance(err, RetryAfter):
            wait_s = max(wait_s, float(err.retry_after if isinstance(err.retry_after, int) else 1))
        await self._health(False, self._mask(f"{type(err).__name__}: {err}"))
        await asyncio.sleep(wait_s)

    # --- running ----------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Poll and send cards until ``stop`` is set (or cancelled)."""
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        loops = [asyncio.create_task(self._poll()), asyncio.create_task(self._send_cards())]
        try:
            waiting = asyncio.create_task(stop.wait())
            await asyncio.wait([waiting, *loops], return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            for done in loops:
                if done.done() and not done.cancelled() and done.exception() is not None:
                    raise done.exception()  # type: ignore[misc]
        finally:
            for loop in loops:
                loop.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self._bot.shutdown()

    async def _poll(self) -> None:
        offset: int | None = None
        while True:
            try:
                await self._bot.initialize()  # getMe, once it succeeds
                updates = await self._bot.get_updates(
                    offset=offset, timeout=int(self._tg.poll_ms / 1000), allowed_updates=["message", "callback_query"]
                )
            except TelegramError as err:
                await self._down(err)
                continue
            await self._health(True)
            for update in updates:
                offset = update.update_id + 1
                try:
                    await self._handle(update)
                except TelegramError as err:
                    log.warning("telegram: could not answer update %d: %s", update.update_id, self._mask(str(err)))
                except Exception:
                    log.exception("telegram: update %d could not be handled", update.update_id)

    async def _send(self, chat_id: int, card: Card) -> Message | None:
        """Send ``card`` (what a person asked for) until it went: Telegram down,
        wait ``retry`` and try again. None when Telegram refused it (logged)."""
        while True:
            try:
                sent = await self._bot.send_message(
                    chat_id,
                    card.text,
                    reply_markup=_markup(card),
                )
            except BadRequest as err:
                log.error("telegram refused a message: %s", self._mask(str(err)))
                return None
            except TelegramError as err:
                await self._down(err)
                continue
            await self._health(True)
            return sent

    async def _sent(self, chat_id: int | None, card: Card) -> bool:
        """Whether ``card`` went, or will never go (refused: logged); False while
        Telegram is down."""
        assert chat_id is not None
        try:
            await self._bot.send_message(chat_id, card.text, reply_markup=_markup(card))
        except BadRequest as err:
            log.error("telegram refused a card: %s", self._mask(str(err)))
            return True
        except TelegramError as err:
            await self._down(err)
            return False
        await self._health(True)
        return True

    # --- cards --------------------------------------------------------------------
    async def _send_cards(self) -> None:
        cursor = await read_cursor(self._store)
        if cursor is None:  # first start: from now on, no replay of history
            gate = await read_gate(self._store)
            cursor = Cursor(0, gate.since if gate.state is not GateState.RUNNING else 0, self._clock.now_ms())
            await save_cursor(self._store, cursor)
        self.following.set()
        while True:
            try:
                cursor = await self._scan(cursor)
            except VigilError as err:
                log.warning("chat: cannot read the store: %s", err)
            await asyncio.sleep(SCAN_S)

    async def _scan(self, cursor: Cursor) -> Cursor:
        """Send the cards of the audit rows after ``cursor`` and of a new gate."""
        start = cursor
        chat_id = await allowed_chat(self._store, self._tg)
        events = await self._store.events_after(
            cursor.event_id, since_ms=cursor.from_ms, kinds=("created", "status"), limit=BATCH
        )
        for event in events:
            card = await self._card_for(event) if chat_id is not None else None
            # Telegram down: stop here; the next scan looks at this task again (it may have moved on)
            if card is not None and chat_id is not None and not await self._sent(chat_id, card):
                break
            cursor = replace(cursor, event_id=event.id)
        gate = await read_gate(self._store)
        if gate.state is not GateState.RUNNING and gate.since != cursor.gate_since:
            told = chat_id is None or "gate" not in self._tg.kinds
            if told or await self._sent(chat_id, gate_card(self._home, gate)):
                cursor = replace(cursor, gate_since=gate.since)
        if cursor != start:
            await save_cursor(self._store, cursor)
        return cursor

    async def _card_for(self, event: TaskEvent) -> Card | None:
        """The card of ``event``'s moment when the task is still there, else None."""
        kinds = self._tg.kinds
        if event.kind == "status" and event.to_value == "waiting" and "question" in kinds:
            task = await self._store.get_task(event.task_id)
            return question_card(self._home, task, event.id) if task.status == "waiting" else None
        if event.to_value == "blocked" or event.kind == "created":
            task = await self._store.get_task(event.task_id)
            if task.awaiting_review and event.kind == "status" and "review" in kinds:
                runs = await self._store.list_runs(task.id)
                run = runs[-1] if runs else None
                return review_card(self._home, task, run, flagged_files(task), event.id)
            if task.awaiting_approval and "approval" in kinds:
                return approval_card(self._home, task, event.id)
            return None
        if event.kind == "status" and event.to_value == "failed" and "failed" in kinds:
            task = await self._store.get_task(event.task_id)
            runs = await self._store.list_runs(task.id)
            return (
                failed_card(self._home, task, runs[-1] if runs else None, event.id) if task.status == "failed" else None
            )
        return None

    # --- what a person sends ------------------------------------------------------
    async def _handle(self, update: Update) -> None:
        chat = update.effective_chat
        if chat is None:
            return
        allowed = await allowed_chat(self._store, self._tg)
        message = update.message
        if allowed is None and message is not None and message.text:
            code = code_in(message.text)
            if code is not None:
                await self._pair(message, code)
                return
        if chat.id != allowed:
            if chat.id not in self._ignored:
                self._ignored.add(chat.id)
                log.warning(
                    "telegram: ignored chat %d (not the paired chat); its further updates are not logged", chat.id
                )
            return
        actor = actor_of(update.effective_user)
        if update.callback_query is not None:
            await self._pressed(chat.id, update.callback_query, actor)
        elif message is not None and message.text:
            await self._message(chat.id, message, actor)

    async def _pair(self, message: Message, code: str) -> None:
        user = actor_of(message.from_user)
        if await try_pair(self._store, code, message.chat_id, user, self._clock.now_ms()):
            log.info("telegram: paired with chat %d (%s)", message.chat_id, user)
            await self._reply(message.chat_id, f"Paired: this chat now steers Vigil's home {self._home}.\n\n{HELP}")
        else:
            log.warning("telegram: chat %d sent a pairing code that is not the pending one", message.chat_id)
            await self._reply(message.chat_id, "That code is not valid: it expired or was used. Run vigil chat pair.")

    async def _reply(self, chat_id: int, text: str, reply_to: int | None = None) -> None:
        await self._bot.send_message(
            chat_id, pages(text)[0], reply_parameters=None if reply_to is None else ReplyParameters(reply_to)
        )

    async def _message(self, chat_id: int, message: Message, actor: str) -> None:
        text = message.text or ""
        if text.startswith("/"):
            await self._command(chat_id, message, text, actor)
            return
        replied = message.reply_to_message
        own = replied is not None and replied.from_user is not None and replied.from_user.id == self._bot.id
        found = read_reference(replied.text or "") if replied is not None and own else None
        if found is None:
            await self._reply(chat_id, HELP, message.message_id)
            return
        task_id, ref = found
        assert replied is not None
        if (replied.text or "").startswith("Why reject"):
            why = await actions.stale(self._store, task_id, ref, "reject")
            done = why or await actions.reject_task(self._store, task_id, text, actor)
        else:
            why = await actions.stale(self._store, task_id, ref, "answer")
            done = why or await actions.answer_task(self._store, task_id, text, actor)
        await self._reply(chat_id, done, message.message_id)

    async def _command(self, chat_id: int, message: Message, text: str, actor: str) -> None:
        name, _, rest = text.partition(" ")
        name = name.split("@")[0].lower()
        rest = rest.strip()
        store, clock = self._store, self._clock
        if name == "/status":
            done = await actions.status_text(store, self._settings, clock)
        elif name == "/add":
            done = await actions.add_task(store, rest, actor)
        elif name == "/pause":
            done = await actions.pause_loop(store, rest, actor, clock)
        elif name == "/resume":
            done = await actions.resume_loop(store, actor, clock)
        elif name == "/answer":
            number, _, answer = rest.partition(" ")
            task_id = _task_number(number)
            done = (
                await actions.answer_task(store, task_id, answer, actor)
                if task_id is not None and answer.strip()
                else "usage: /answer N <text>"
            )
        elif name == "/diff":
            task_id = _task_number(rest)
            if task_id is None:
                done = "usage: /diff N"
            else:
                await self._diff_page(chat_id, task_id, 0, 0)
                return
        else:
            done = HELP
        await self._reply(chat_id, done, message.message_id)

    async def _diff_page(self, chat_id: int, task_id: int, ref: int, page: int) -> None:
        """Page ``page`` of the task's diff, with More while there are more."""
        shown = pages(await actions.diff_of(self._settings, task_id))
        page = min(page, len(shown) - 1)
        more = page + 1 < len(shown)
        head = f"Diff of task #{task_id}, page {page + 1} of {len(shown)}\n"
        buttons = ((Button("More", press_data("diff", task_id, ref, page + 1)),),) if more else ()
        await self._send(chat_id, Card(head + shown[page], buttons))

    async def _pressed(self, chat_id: int, query: CallbackQuery, actor: str) -> None:
        press = read_press(query.data or "")
        if press is None or press.action == "no":
            await query.answer("Nothing done.")
            return
        store, task_id, ref = self._store, press.task_id, press.ref
        card = query.message if isinstance(query.message, Message) else None
        done: str
        if press.action == "diff":
            await query.answer()
            await self._diff_page(chat_id, task_id, ref, press.arg or 0)
            return
        if press.action == "more":
            await query.answer()
            task = await store.get_task(task_id)
            body = "\n\n".join(x for x in (task.description, task.question, task.result_summary) if x)
            for page in pages(f"Task #{task_id}: {task.subject}\n\n{body}")[:5]:
                await self._send(chat_id, Card(page))
            return
        if press.action == "resume":
            done = await actions.resume_loop(store, actor, self._clock, since=ref)
        elif press.action == "reject":
            why = await actions.stale(store, task_id, ref, "reject")
            if why is None:
                await query.answer()
                await self._send(chat_id, reason_prompt(self._home, task_id, ref))
                return
            done = why
        elif press.action == "cancel":
            why = await actions.stale(store, task_id, ref, "cancel")
            if why is None:
                await query.answer()
                yes = Button("Yes, give up", press_data("cancelyes", task_id, ref))
                text = f"Give up on task #{task_id}? It stays failed and is not retried."
                await self._send(chat_id, confirm_card(text, yes))
                return
            done = why
        elif press.action in ("approve", "retry", "cancelyes", "choice"):
            action = "cancel" if press.action == "cancelyes" else press.action
            why = await actions.stale(store, task_id, ref, action)
            done = why or await self._act(press.action, task_id, press.arg, actor)
        else:
            done = "unknown button"
        await query.answer(done[:200])
        if card is not None and card.text:
            await self._bot.edit_message_text(
                f"{card.text}\n\n→ {done}"[:4096], chat_id=chat_id, message_id=card.message_id
            )

    async def _act(self, action: str, task_id: int, arg: int | None, actor: str) -> str:
        store = self._store
        if action == "approve":
            return await actions.approve_task(store, task_id, actor)
        if action == "retry":
            return await actions.retry_task(store, task_id, actor)
        if action == "cancelyes":
            return await actions.give_up(store, task_id, actor)
        task = await store.get_task(task_id)  # a choice of the question
        if arg is None or not 1 <= arg <= len(task.choices):
            return "that choice is not offered"
        return await actions.answer_task(store, task_id, task.choices[arg - 1], actor)


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
            await record_health(store, up=False, error=str(err), now_ms=clock.now_ms())
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
