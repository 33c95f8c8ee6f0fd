"""Pairing: ``vigil chat pair`` prints a one-time code, the first chat that sends
it to the bot is the one allowed; a wrong, used or expired code pairs nothing;
``vigil chat unpair`` revokes. The config's keys and their errors."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chat.bot_api import BotApi, bot_api
from tests.chat.support import PERSON, STRANGER, card, cards_to, chat_settings, chat_toml, running_bot
from tests.conftest import VigilRunner
from vigil.chat.pairing import CODE_TTL_MS, PAIRED_KEY, start_pairing, try_pair
from vigil.config import load_settings
from vigil.errors import ConfigError
from vigil.gate import GateState, read_gate
from vigil.store import open_store


@pytest.fixture
def api() -> Iterator[BotApi]:
    with bot_api() as running:
        yield running
        assert running.problems == []


@pytest.mark.slow
async def test_the_chat_that_sends_the_code_is_paired_and_no_other(
    home: Path, api: BotApi, vigil: VigilRunner, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vigil.chat")
    settings = chat_settings(home, api, chat_id=None)
    paired = vigil("chat", "pair")
    assert paired.returncode == 0, paired.stderr
    code = paired.stdout.split()[-1]
    assert code.startswith("VIGIL-")
    store = await open_store(settings)
    try:
        assert code not in json.dumps(await store.loop_values())  # kept as its digest only
        async with running_bot(settings, store):
            api.say(STRANGER, "VIGIL-AAAA-BBBB")
            await card(api, "That code is not valid", STRANGER)
            api.say(STRANGER, "/pause")
            api.say(PERSON, f"/start {code}")
            await card(api, f"Paired: this chat now steers Vigil's home {home.name}")
            api.say(STRANGER, code)  # used, and a chat is paired: ignored
            api.say(STRANGER, "/pause")
            api.say(PERSON, "/pause lunch")
            await card(api, "the loop is paused")
        assert (await read_gate(store)).by == f"human via telegram @ada{PERSON} ({PERSON})"
        value = (await store.loop_values())[PAIRED_KEY]
        assert isinstance(value, dict)
        assert value["chat_id"] == PERSON
        assert len(cards_to(api, STRANGER, "")) == 1  # the refusal of its wrong code, nothing else
        assert any(f"paired with chat {PERSON}" in r.getMessage() for r in caplog.records)

        unpaired = vigil("chat", "unpair")
        assert unpaired.stdout.strip() == f"chat {PERSON} unpaired: it can no longer act"
        async with running_bot(settings, store):
            api.say(PERSON, "/resume")
            api.say(PERSON, code)  # used up: pairs nothing
            await card(api, "That code is not valid", PERSON)
        assert (await read_gate(store)).state is GateState.PAUSED  # the /resume did nothing
    finally:
        await store.close()


async def test_an_expired_code_pairs_nothing(home: Path, api: BotApi) -> None:
    settings = chat_settings(home, api, chat_id=None)
    assert settings.telegram is not None
    store = await open_store(settings)
    try:
        code = await start_pairing(store, settings.telegram, now_ms=1_000)
        assert not await try_pair(store, code, PERSON, "ada", now_ms=1_000 + CODE_TTL_MS + 1)
        assert await try_pair(store, code.lower(), PERSON, "ada", now_ms=1_000 + CODE_TTL_MS)  # typed in lower case
        assert not await try_pair(store, code, STRANGER, "eve", now_ms=2_000)  # once only
    finally:
        await store.close()


@pytest.mark.slow
def test_pair_is_refused_when_the_config_pins_the_chat_or_has_no_bot(home: Path, vigil_in_process: VigilRunner) -> None:
    refused = vigil_in_process("chat", "pair")
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith("error: no [chat.telegram] table in vigil.toml: see docs/chat.md")
    with bot_api() as api:
        chat_settings(home, api)  # chat_id pinned
    pinned = vigil_in_process("chat", "pair")
    assert pinned.returncode == 2
    assert "chat_id is set in vigil.toml" in pinned.stderr
    assert "Traceback" not in pinned.stderr


def test_chat_run_without_the_token_says_which_variable(home: Path, vigil_in_process: VigilRunner) -> None:
    with bot_api() as api:
        chat_settings(home, api)
    ran = vigil_in_process("chat", "run")
    assert ran.returncode == 2
    assert "VIGIL_TELEGRAM_TOKEN is not set" in ran.stderr
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('[chat.telegram]\nchat_id = "me"', "[chat.telegram] chat_id: expected a Telegram chat id"),
        ('[chat.telegram]\nkinds = ["everything"]', "[chat.telegram] kinds: expected a list among question, review"),
        ('[chat.telegram]\napi_url = "ftp://x"', "[chat.telegram] api_url: expected an http(s) URL"),
        ("[chat.telegram]\npoll = 3", "[chat.telegram] poll:"),
        ('[chat.telegram]\ntoken = "123:abc"', "unknown key"),
        ("[chat.slack]\nx = 1", "[chat.slack] unknown chat service (expected telegram)"),
        (
            '[dispatch]\npass_env = ["VIGIL_TELEGRAM_TOKEN"]\n[chat.telegram]',
            "token_env: VIGIL_TELEGRAM_TOKEN is in [dispatch] pass_env: the agent would get the token",
        ),
    ],
)
def test_config_errors_name_the_key(home: Path, table: str, expected: str) -> None:
    (home / "vigil.toml").write_text(table + "\n")
    with pytest.raises(ConfigError, match=None) as raised:
        load_settings(home)
    assert expected in str(raised.value)
    assert str(home / "vigil.toml") in str(raised.value)


def test_the_defaults(home: Path) -> None:
    with bot_api() as api:
        (home / "vigil.toml").write_text(chat_toml(api, chat_id=None).replace('poll = "1s"\nretry = "1s"\n', ""))
    telegram = load_settings(home).telegram
    assert telegram is not None
    assert (telegram.token_env, telegram.chat_id, telegram.poll_ms, telegram.retry_ms) == (
        "VIGIL_TELEGRAM_TOKEN",
        None,
        30_000,
        30_000,
    )
    assert telegram.kinds == ("question", "review", "approval", "failed", "gate")
    assert load_settings(home.parent).telegram is None  # no table: no bot


def test_status_says_nothing_of_a_chat_without_one_and_unknown_before_the_bot_ran(
    home: Path, vigil_in_process: VigilRunner
) -> None:
    without = vigil_in_process("status", "--json")
    assert without.returncode == 0, without.stderr
    assert json.loads(without.stdout)["chat"] is None
    assert "chat:" not in vigil_in_process("status").stdout
    with bot_api() as api:
        chat_settings(home, api)
    never = json.loads(vigil_in_process("status", "--json").stdout)["chat"]
    assert never == {"state": "unknown", "since": None, "error": None}
    assert "chat: telegram unknown" in vigil_in_process("status").stdout
