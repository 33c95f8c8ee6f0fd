"""What the chat keeps in the database (``loop_state``): the one chat allowed to
act, the one-time pairing code, the bot's cursor in the audit trail and its health.

The paired chat is kept in the database rather than written into ``vigil.toml``:
Vigil never rewrites the person's config (their comments and layout stay), a
running bot sees a new pairing at once, and ``vigil chat unpair`` revokes it with
one conditional write. ``chat_id`` in ``[chat.telegram]`` pins a chat instead
(pairing is then refused). The token is kept nowhere: it is read from the
variable ``token_env`` names when the bot starts.

The code is stored as its SHA-256 only, expires after ``CODE_TTL_MS`` and is
consumed by one atomic compare-and-set: two chats sending it at once cannot both
pair.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from vigil.config import TelegramSettings
from vigil.errors import InputError
from vigil.models import CHAT_HEALTH_KEY
from vigil.store import Store

PAIRING_KEY = "chat.telegram.pairing"  # {"sha256": hex, "until": epoch_ms}
PAIRED_KEY = "chat.telegram.paired"  # {"chat_id": int, "user": str, "at": epoch_ms}
CURSOR_KEY = "chat.telegram.cursor"  # {"event_id": int, "gate_since": int, "from_ms": int}
CODE_TTL_MS = 10 * 60_000
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: typed on a phone


def _digest(code: str) -> str:
    return hashlib.sha256(code.strip().upper().encode()).hexdigest()


def new_code() -> str:
    """A fresh one-time code, ``VIGIL-XXXX-XXXX`` (40 bits)."""
    chars = "".join(secrets.choice(CODE_ALPHABET) for _ in range(8))
    return f"VIGIL-{chars[:4]}-{chars[4:]}"


async def start_pairing(store: Store, settings: TelegramSettings, now_ms: int) -> str:
    """Store a new code (replacing any earlier one) and return it. Raises
    ``InputError`` when the config pins ``chat_id``."""
    if settings.chat_id is not None:
        raise InputError(
            "[chat.telegram] chat_id is set in vigil.toml: that chat is the one allowed; remove it to pair"
        )
    code = new_code()
    await store.set_loop_values({PAIRING_KEY: {"sha256": _digest(code), "until": now_ms + CODE_TTL_MS}})
    return code


async def unpair(store: Store) -> int | None:
    """Forget the paired chat and any pending code; returns the chat id it forgot."""
    values = await store.loop_values()
    paired = values.get(PAIRED_KEY)
    await store.set_loop_values({PAIRED_KEY: None, PAIRING_KEY: None})
    return _chat_id_of(paired)


def _chat_id_of(value: object) -> int | None:
    if isinstance(value, dict) and isinstance(value.get("chat_id"), int):
        return int(value["chat_id"])
    return None


async def allowed_chat(store: Store, settings: TelegramSettings) -> int | None:
    """The one chat allowed to act: the config's, else the paired one; None: none yet."""
    if settings.chat_id is not None:
        return settings.chat_id
    return _chat_id_of((await store.loop_values()).get(PAIRED_KEY))


def code_in(text: str) -> str | None:
    """The pairing code a message carries (``CODE`` or ``/start CODE``), or None."""
    words = text.split()
    if len(words) == 2 and words[0].split("@")[0] == "/start":
        words = words[1:]
    return words[0] if len(words) == 1 and words[0].upper().startswith("VIGIL-") else None


async def try_pair(store: Store, code: str, chat_id: int, user: str, now_ms: int) -> bool:
    """Pair ``chat_id`` when ``code`` is the pending, unexpired code; the code is
    used up atomically (a second chat with it gets False)."""
    pending = (await store.loop_values()).get(PAIRING_KEY)
    if not isinstance(pending, dict) or pending.get("sha256") != _digest(code):
        return False
    until = pending.get("until")
    if not isinstance(until, int) or until < now_ms:
        return False
    if not await store.replace_loop_value(PAIRING_KEY, pending, None):
        return False  # another chat used it a moment before
    await store.set_loop_values({PAIRED_KEY: {"chat_id": chat_id, "user": user, "at": now_ms}})
    return True


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where the bot is: the last audit row it turned into a card (or skipped), the
    gate it last told about (its ``since``), and when it first ran (``from_ms``,
    epoch ms): what happened before is history, never sent."""

    event_id: int = 0
    gate_since: int = 0
    from_ms: int = 0


async def read_cursor(store: Store) -> Cursor | None:
    """The stored cursor; None before the bot first ran."""
    value = (await store.loop_values()).get(CURSOR_KEY)
    if not isinstance(value, dict):
        return None
    numbers = [value.get(name) for name in ("event_id", "gate_since", "from_ms")]
    return Cursor(*(n if isinstance(n, int) else 0 for n in numbers))


async def save_cursor(store: Store, cursor: Cursor) -> None:
    value = {"event_id": cursor.event_id, "gate_since": cursor.gate_since, "from_ms": cursor.from_ms}
    await store.set_loop_values({CURSOR_KEY: value})


async def record_health(store: Store, state: str, *, error: str | None, now_ms: int) -> None:
    """Say how the bot fares (``vigil status`` shows it): ``up`` (Telegram
    answers), ``down`` (it does not, or the bot cannot run: ``error`` says why) or
    ``stopped`` (the bot was stopped)."""
    value = {"state": state, "since": now_ms, "error": error}
    await store.set_loop_values({CHAT_HEALTH_KEY: value})
