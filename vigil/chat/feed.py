"""The cards the bot sends by itself: it follows the audit trail
(``Store.events_after``, about once a second, from its cursor in ``loop_state``)
and the gate, and turns each moment a person is needed into a card
(``vigil.chat.cards``) of the kinds ``[chat.telegram] kinds`` names.

The cursor moves past a row only once its card went (or it needs none): while
Telegram is down the feed stops at that row, and the next scan looks at the task
again, so a task that moved on meanwhile gets no card when Telegram is back.
What happened before the bot first ran is history, never sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from vigil.chat.cards import Card, approval_card, failed_card, gate_card, question_card, review_card
from vigil.chat.pairing import Cursor, allowed_chat, read_cursor, save_cursor
from vigil.clock import Clock
from vigil.config import Settings
from vigil.errors import TaskNotFound, VigilError
from vigil.gate import GateState, read_gate
from vigil.models import Task, TaskEvent
from vigil.printable import printable
from vigil.store import Store
from vigil.taskdiff import flags_of

log = logging.getLogger("vigil.chat")

SCAN_S = 1.0  # how often the feed reads the audit trail and the gate
BATCH = 100  # audit rows per read


def flagged_files(task: Task) -> tuple[str, ...]:
    """The files a review card flags for a careful look (``vigil.flags``), each
    with why; the agent named them, so the card shows them through ``printable``."""
    return tuple(printable(f"{flag.path} ({flag.why})") for flag in flags_of(task.worktree))


class CardFeed:
    """Sends each new moment's card through ``sent(chat_id, card)``, which says
    whether it went (False: Telegram is down; try again later)."""

    def __init__(
        self, settings: Settings, store: Store, clock: Clock, sent: Callable[[int, Card], Awaitable[bool]]
    ) -> None:
        assert settings.telegram is not None
        self._tg = settings.telegram
        self._home = settings.home.name
        self._store = store
        self._clock = clock
        self._sent = sent
        self.following = asyncio.Event()  # set once the feed knows where it starts from

    async def run(self) -> None:
        """Until cancelled."""
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
        cursor = await self._tell_gate(chat_id, cursor)
        if cursor != start:
            await save_cursor(self._store, cursor)
        return cursor

    async def _tell_gate(self, chat_id: int | None, cursor: Cursor) -> Cursor:
        """``cursor`` past the gate's card when the loop stands at a gate (or pause)
        not told about yet; unmoved while Telegram is down (told on a later scan)."""
        gate = await read_gate(self._store)
        if gate.state is GateState.RUNNING or gate.since == cursor.gate_since:
            return cursor
        wanted = chat_id is not None and "gate" in self._tg.kinds
        if wanted and chat_id is not None and not await self._sent(chat_id, gate_card(self._home, gate)):
            return cursor
        return replace(cursor, gate_since=gate.since)

    async def _card_for(self, event: TaskEvent) -> Card | None:
        """The card of ``event``'s moment when its task is still there, else None."""
        try:
            task = await self._store.get_task(event.task_id)
        except TaskNotFound:  # pruned meanwhile
            return None
        kinds, ref = self._tg.kinds, event.id
        if event.kind == "status" and event.to_value == "waiting":
            return question_card(self._home, task, ref) if task.status == "waiting" and "question" in kinds else None
        if event.to_value == "blocked" or event.kind == "created":
            if task.awaiting_review and event.kind == "status" and "review" in kinds:
                runs = await self._store.list_runs(task.id)
                return review_card(
                    self._home, task, runs[-1] if runs else None, await asyncio.to_thread(flagged_files, task), ref
                )
            if task.awaiting_approval and "approval" in kinds:
                return approval_card(self._home, task, ref)
            return None
        if event.kind == "status" and event.to_value == "failed" and task.status == "failed" and "failed" in kinds:
            runs = await self._store.list_runs(task.id)
            return failed_card(self._home, task, runs[-1] if runs else None, ref)
        return None
