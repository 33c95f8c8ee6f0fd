"""The Telegram bot: long polling through python-telegram-bot (no open port), one
chat allowed to act (``vigil.chat.pairing``), cards for each moment a person is
needed (``vigil.chat.cards``), and a person's replies, buttons and commands turned
into the CLI's operations (``vigil.chat.actions``).

Two loops share one ``Bot``: the poller reads updates (``getUpdates``) and acts
on them; the card feed (``vigil.chat.feed``) follows the audit trail and the gate
and sends cards. When Telegram cannot be reached either loop records the chat as
down (``vigil status`` says so), waits ``[chat.telegram] retry`` and tries again;
the feed catches up when Telegram is back. Nothing here ever stops the dispatch
loop.

The token lives in this process's memory only: every text this module logs or
records has it masked, and python-telegram-bot's and httpx's own loggers are kept
at WARNING (httpx logs each request's URL, which holds the token).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

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
    confirm_card,
    pages,
    press_data,
    read_press,
    read_reference,
    reason_prompt,
)
from vigil.chat.feed import CardFeed
from vigil.chat.pairing import allowed_chat, code_in, record_health, try_pair
from vigil.clock import Clock
from vigil.config import Settings
from vigil.errors import VigilError
from vigil.models import MAX_ID
from vigil.printable import printable
from vigil.store import Store

log = logging.getLogger("vigil.chat")

QUIET_LOGGERS = ("telegram", "httpx", "httpcore")
HELP = (
    "Vigil's bot. Reply to a question to answer it; use the buttons on a card.\n"
    "/status  the loop and the queue\n"
    "/add <subject>  add a task\n"
    "/pause [reason]  /resume  the loop\n"
    "/answer N <text>  answer task N's question\n"
    "/diff N  task N's diff"
)


def actor_of(user: User | None) -> str:
    """Who acted, for the audit trail: ``human via telegram @name (id)``."""
    if user is None:
        return "human via telegram"
    name = f"@{user.username}" if user.username else user.full_name
    return f"human via telegram {printable(name, keep_newlines=False)[:64]} ({user.id})"


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
        # Time periods as python-telegram-bot's next major version has them (timedelta):
        # without this, each flood-control answer (RetryAfter) raises a deprecation warning.
        os.environ.setdefault("PTB_TIMEDELTA", "true")
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
        self.feed = CardFeed(settings, store, clock, self._sent)

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
            await record_health(self._store, "up" if up else "down", error=error, now_ms=self._clock.now_ms())
        except VigilError as err:
            log.warning("could not record the chat's health: %s", err)

    async def _down(self, err: TelegramError) -> None:
        """Telegram failed: recorded, then a wait of ``retry``. Asked to slow down
        (flood control), only the wait Telegram asks for: it is not down."""
        if isinstance(err, RetryAfter):
            after = err.retry_after
            await asyncio.sleep(after if isinstance(after, int) else after.total_seconds())
            return
        await self._health(False, self._mask(f"{type(err).__name__}: {err}"))
        await asyncio.sleep(self._tg.retry_ms / 1000)

    # --- running ----------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Poll and send cards until ``stop`` is set (or cancelled)."""
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        loops = [asyncio.create_task(self._poll()), asyncio.create_task(self.feed.run())]
        waiting = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait([waiting, *loops], return_when=asyncio.FIRST_COMPLETED)
            for ended in (loop for loop in loops if loop.done() and not loop.cancelled()):
                error = ended.exception()  # a bug: the chat stops, the loop it serves does not
                log.error("chat: stopped by an unexpected error", exc_info=error)
                self._up = None
                await self._health(False, self._mask(f"stopped by an unexpected error: {error!r}"))
        finally:
            waiting.cancel()
            closing = asyncio.ensure_future(self._close(loops))
            try:
                await asyncio.shield(closing)
            except asyncio.CancelledError:  # stopped by cancellation (vigil run's helpers): close all the same
                await closing
                raise

    async def _close(self, loops: list[asyncio.Task[None]]) -> None:
        for loop in loops:
            loop.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self._bot.shutdown()
        with contextlib.suppress(Exception):  # the store may be closing too
            await record_health(self._store, "stopped", error=None, now_ms=self._clock.now_ms())

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

    async def _sent(self, chat_id: int, card: Card) -> bool:
        """Whether ``card`` went, or will never go (refused: logged); False while
        Telegram is down (after the wait of ``retry``)."""
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

    async def _more(self, chat_id: int, query: CallbackQuery, task_id: int) -> None:
        """The whole text a card was cut from: the task's description, question and
        summary, in pages (five at most; the rest is in ``vigil task show``)."""
        try:
            task = await self._store.get_task(task_id)
        except VigilError as err:
            await query.answer(str(err)[:200])
            return
        await query.answer()
        body = "\n\n".join(x for x in (task.description, task.question, task.result_summary) if x)
        for page in pages(f"Task #{task_id}: {task.subject}\n\n{body}")[:5]:
            await self._send(chat_id, Card(page))

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
            await self._more(chat_id, query, task_id)
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
