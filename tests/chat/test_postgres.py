"""The bot on a PostgreSQL store: the feed's audit trail, the pairing's atomic
use of the code and the health record are the same store operations there."""

from __future__ import annotations

from pathlib import Path

from tests.chat.bot_api import bot_api
from tests.chat.support import PERSON, card, chat_toml, reviewed_task, running_bot, until
from vigil.chat.pairing import start_pairing
from vigil.clock import SystemClock
from vigil.config import load_settings
from vigil.store import open_store


async def test_pairing_and_an_approval_from_the_chat_on_postgresql(home: Path, postgres_migrated_url: str) -> None:
    with bot_api() as api:
        (home / "vigil.toml").write_text(f'[store]\nurl = "{postgres_migrated_url}"\n' + chat_toml(api, chat_id=None))
        settings = load_settings(home)
        assert settings.telegram is not None
        store = await open_store(settings)
        try:
            code = await start_pairing(store, settings.telegram, now_ms=SystemClock().now_ms())
            async with running_bot(settings, store):
                api.say(PERSON, code)
                await card(api, "Paired: this chat now steers")
                task_id = await reviewed_task(store, "Tidy the docs")
                review = await card(api, "Awaiting your review.")
                api.press(PERSON, review, "Approve")
                await until(lambda: api.edits, "the card edited")
            assert (await store.get_task(task_id)).status == "completed"
        finally:
            await store.close()
        assert api.problems == []
