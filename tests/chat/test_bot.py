"""The Telegram bot against the scripted Bot API, in this process: each card a
person needs, and each thing a person does from the chat, done as the CLI does it
and audited as a person via telegram; another chat ignored; stale buttons."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.chat.bot_api import BotApi, bot_api, button_data, labels
from tests.chat.support import (
    PERSON,
    STRANGER,
    card,
    cards_to,
    chat_settings,
    failed_task,
    reviewed_task,
    running_bot,
    until,
    waiting_task,
)
from vigil.config import Settings
from vigil.gate import GateState, read_gate
from vigil.models import CHAT_HEALTH_KEY, NewTask, Outcome, OutcomeKind
from vigil.store import Store, open_store

pytestmark = pytest.mark.slow  # each runs the bot for a second or more

ACTOR = f"human via telegram @ada{PERSON} ({PERSON})"


@pytest.fixture
def api() -> Iterator[BotApi]:
    with bot_api() as running:
        yield running
        assert running.problems == []  # every request followed the Bot API's documentation


@pytest.fixture
def settings(home: Path, api: BotApi) -> Settings:
    return chat_settings(home, api)


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[Store]:
    opened = await open_store(settings)
    yield opened
    await opened.close()


async def status_events(store: Store, task_id: int) -> list[tuple[str, str | None]]:
    return [(e.actor, e.to_value) for e in await store.list_events(task_id) if e.kind == "status"]


async def test_a_question_goes_out_with_its_choices_and_a_reply_answers_it(
    api: BotApi, settings: Settings, store: Store
) -> None:
    async with running_bot(settings, store):
        task_id = await waiting_task(store, "Deploy the release", "Staging or prod?", ("staging", "prod"))
        question = await card(api, "Staging or prod?")
        assert f"Task #{task_id}: Deploy the release" in question["text"]
        assert f"{settings.home.name} · task #{task_id} · ref " in question["text"]  # names the task and home
        assert labels(question) == ["staging", "prod"]
        api.say(PERSON, "staging, after the freeze", reply_to=question)
        await card(api, f"task #{task_id} answered: staging, after the freeze")
    task = await store.get_task(task_id)
    assert (task.status, task.answer) == ("pending", "staging, after the freeze")
    notes = await store.list_notes(task_id)
    assert [(n.author, n.text) for n in notes] == [(ACTOR, "answer: staging, after the freeze")]


async def test_a_choice_button_answers_and_the_card_says_so(api: BotApi, settings: Settings, store: Store) -> None:
    async with running_bot(settings, store):
        task_id = await waiting_task(store, "Deploy", "Where to?", ("staging", "prod"))
        question = await card(api, "Where to?")
        api.press(PERSON, question, "prod")
        await until(lambda: api.edits, "the card edited")
    assert (await store.get_task(task_id)).answer == "prod"
    assert f"→ task #{task_id} answered: prod" in api.edits[-1]["text"]
    assert api.answers[-1]["text"] == f"task #{task_id} answered: prod"


async def test_approve_from_a_button_completes_a_reviewed_task(api: BotApi, settings: Settings, store: Store) -> None:
    async with running_bot(settings, store):
        task_id = await reviewed_task(store, "Tidy the docs")
        review = await card(api, "Awaiting your review.")
        assert "Summary: did it" in review["text"]
        assert labels(review) == ["Approve", "Reject…"]  # no repository: no Diff
        api.press(PERSON, review, "Approve")
        await until(lambda: api.edits, "the card edited")
    assert (await store.get_task(task_id)).status == "completed"
    assert (await status_events(store, task_id))[-1] == (ACTOR, "completed")


async def test_reject_asks_for_the_reason_and_sends_the_task_back_with_it(
    api: BotApi, settings: Settings, store: Store
) -> None:
    async with running_bot(settings, store):
        task_id = await reviewed_task(store, "Rename the module")
        review = await card(api, "Awaiting your review.")
        api.press(PERSON, review, "Reject…")
        prompt = await card(api, f"Why reject task #{task_id}?")
        assert (await store.get_task(task_id)).awaiting_review  # nothing done before the reason
        api.say(PERSON, "keep the old name as an alias", reply_to=prompt)
        await card(api, f"task #{task_id} sent back to its agent")
    task = await store.get_task(task_id)
    assert task.status == "pending"
    assert (ACTOR, "review: keep the old name as an alias") in [
        (n.author, n.text) for n in await store.list_notes(task_id)
    ]


async def test_approval_cards_approve_and_reject(api: BotApi, settings: Settings, store: Store) -> None:
    async with running_bot(settings, store):
        first = (await store.add_task(NewTask("Rotate the keys", requires_approval=True))).task_id
        second = (await store.add_task(NewTask("Drop the old table", requires_approval=True))).task_id
        assert first is not None
        assert second is not None
        one = await card(api, f"Task #{first}: Rotate the keys")
        two = await card(api, f"Task #{second}: Drop the old table")
        assert "Awaiting your approval to run." in one["text"]
        api.press(PERSON, one, "Approve")
        api.press(PERSON, two, "Reject…")
        prompt = await card(api, f"Why reject task #{second}?")
        api.say(PERSON, "not this week", reply_to=prompt)
        await card(api, f"task #{second} rejected")
    assert (await store.get_task(first)).status == "pending"
    assert (await store.get_task(second)).status == "canceled"


async def test_retry_and_a_confirmed_give_up_on_tasks_that_failed_for_good(
    api: BotApi, settings: Settings, store: Store
) -> None:
    async with running_bot(settings, store):
        retried = await failed_task(store, "Fetch the feed")
        canceled = await failed_task(store, "Parse the feed")
        one = await card(api, f"Task #{retried}: Fetch the feed")
        two = await card(api, f"Task #{canceled}: Parse the feed")
        assert "Failed for good after 1 attempt(s)." in one["text"]
        assert "Last: it broke" in one["text"]
        api.press(PERSON, one, "Retry")
        api.press(PERSON, two, "Cancel")
        confirm = await card(api, f"Give up on task #{canceled}?")
        assert await store.list_notes(canceled) == []  # nothing before the confirmation
        api.press(PERSON, confirm, "Yes, give up")
        await until(lambda: len(api.edits) == 2, "both cards edited")
    assert (await store.get_task(retried)).status == "pending"
    assert (await status_events(store, retried))[-1] == (ACTOR, "pending")
    assert (await store.get_task(canceled)).status == "failed"  # finished: it stays failed, never retried
    notes = [(n.author, n.text) for n in await store.list_notes(canceled)]
    assert notes == [(ACTOR, "given up from the chat: stays failed, not retried")]


async def test_pause_and_resume_from_commands_and_the_resume_button(
    api: BotApi, settings: Settings, store: Store
) -> None:
    async with running_bot(settings, store):
        api.say(PERSON, "/pause deploy freeze")
        await card(api, "the loop is paused")
        gate = await read_gate(store)
        assert (gate.state, gate.reason, gate.by) == (GateState.PAUSED, "deploy freeze", ACTOR)
        paused = await card(api, "The loop is paused: deploy freeze")  # the gate's card, with Resume
        api.say(PERSON, "/resume")
        await card(api, "the loop is running again")
        assert (await read_gate(store)).state is GateState.RUNNING
        api.press(PERSON, paused, "Resume")  # that pause is over: the button says so
        await until(lambda: api.edits, "the card edited")
        assert "the loop is already running (by human via telegram" in api.edits[-1]["text"]
        api.say(PERSON, "/pause")
        again = await card(api, "The loop is paused: paused from the chat")
        api.press(PERSON, again, "Resume")
        await until(lambda: len(api.edits) == 2, "the second card edited")
    assert (await read_gate(store)).state is GateState.RUNNING


async def test_status_add_answer_and_diff_commands(api: BotApi, settings: Settings, store: Store) -> None:
    async with running_bot(settings, store):
        asked = await waiting_task(store, "Pick a name", "Which name?")
        await card(api, "Which name?")
        api.say(PERSON, "/add Write the release notes")
        added = await card(api, "added: Write the release notes")
        task_id = int(added["text"].split("#")[1].split()[0])
        task = await store.get_task(task_id)
        assert (task.subject, task.source) == ("Write the release notes", "human")
        api.say(PERSON, "/status")
        status = await card(api, "queue:")
        assert "1 pending" in status["text"]
        assert "1 waiting" in status["text"]
        api.say(PERSON, f"/answer {asked} vigil-chat")
        await card(api, f"task #{asked} answered: vigil-chat")
        api.say(PERSON, f"/diff {task_id}")
        await card(api, f"no diff: task #{task_id} has no change")
        api.say(PERSON, "/answer x")
        await card(api, "usage: /answer N <text>")
        api.say(PERSON, f"/answer {10**30} yes")  # not a task id: said, nothing raised
        await until(lambda: len(cards_to(api, PERSON, "usage: /answer N <text>")) == 2, "the second usage line")
        api.say(PERSON, "/answer 999 yes")
        await card(api, "not done: ")
    assert (await store.get_task(asked)).answer == "vigil-chat"


async def test_another_chat_is_ignored_and_logged_once(
    api: BotApi, settings: Settings, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="vigil.chat")
    async with running_bot(settings, store):
        task_id = await reviewed_task(store, "Ship it")
        review = await card(api, "Awaiting your review.")
        asked = await waiting_task(store, "Ask", "Yes or no?")
        question = await card(api, "Yes or no?")
        api.press(STRANGER, {**review, "chat": {"id": STRANGER, "type": "private", "first_name": "Eve"}}, "Approve")
        api.say(STRANGER, "/pause")
        api.say(STRANGER, "/add Mine the bitcoins")
        api.say(STRANGER, "yes", reply_to=question)
        api.say(PERSON, "/status")  # after the stranger's updates: they were handled by now
        await card(api, "queue:")
    assert cards_to(api, STRANGER, "") == []  # not one word to the stranger
    assert api.answers == []
    assert (await store.get_task(task_id)).awaiting_review
    assert (await store.get_task(asked)).status == "waiting"
    assert (await read_gate(store)).state is GateState.RUNNING
    assert sorted(t.subject for t in await store.list_tasks()) == ["Ask", "Ship it"]
    ignored = [r for r in caplog.records if f"ignored chat {STRANGER}" in r.getMessage()]
    assert len(ignored) == 1


async def test_a_stale_button_answers_what_happened_instead_of_acting(
    api: BotApi, settings: Settings, store: Store
) -> None:
    async with running_bot(settings, store):
        task_id = await reviewed_task(store, "Fix the parser")
        old = await card(api, "Awaiting your review.")
        await store.reject(task_id, "not yet", actor="human")  # from the terminal meanwhile
        claim = await store.claim_next(worker="d", lease_ms=60_000)  # a second run, a new result
        assert claim is not None
        await store.record(claim, Outcome(OutcomeKind.SUCCESS, summary="second try", review=True), worker="d")
        await until(lambda: len(cards_to(api, PERSON, "Awaiting your review.")) == 2, "the new result's card")
        api.press(PERSON, old, "Approve")  # the first result's button: not the result now shown
        await until(lambda: api.edits, "the old card edited")
    assert (await store.get_task(task_id)).awaiting_review  # the new result was not approved unseen
    said = api.answers[-1]["text"]
    assert said.startswith(f"task #{task_id} has moved on: it is awaiting review now (pending by human at ")
    assert "; blocked by dispatcher at " in said
    assert button_data(old, "Approve") != button_data(cards_to(api, PERSON, "Awaiting your review.")[-1], "Approve")


async def test_a_button_on_a_task_finished_from_elsewhere_says_who_finished_it(
    api: BotApi, settings: Settings, store: Store
) -> None:
    async with running_bot(settings, store):
        task_id = await reviewed_task(store, "Bump the version")
        review = await card(api, "Awaiting your review.")
        await store.approve(task_id, actor="human")  # `vigil task approve` meanwhile
        api.press(PERSON, review, "Reject…")
        await until(lambda: api.edits, "the card edited")
    assert api.answers[-1]["text"].startswith(f"task #{task_id} has moved on: it is completed now (completed by human")
    assert not cards_to(api, PERSON, "Why reject")  # no reason asked for: nothing to reject
    assert (await store.get_task(task_id)).status == "completed"


async def test_a_long_question_is_cut_with_more_to_read_the_rest(api: BotApi, settings: Settings, store: Store) -> None:
    long = "Which of these? " + " ".join(f"option-{n}" for n in range(900)) + " END"
    async with running_bot(settings, store):
        task_id = await waiting_task(store, "Choose", long)
        question = await card(api, "Which of these?")
        assert len(question["text"]) < 4096
        assert "END" not in question["text"]
        assert labels(question) == ["More"]
        api.press(PERSON, question, "More")
        await until(lambda: cards_to(api, PERSON, "END"), "the rest of the question")
        api.say(PERSON, "option-7", reply_to=question)  # the cut card still takes the answer
        await card(api, f"task #{task_id} answered: option-7")


async def test_flood_control_slows_the_bot_down_without_calling_telegram_down(
    api: BotApi, settings: Settings, store: Store
) -> None:
    api.throttle = 2
    async with running_bot(settings, store):
        await failed_task(store, "Flaky")
        await card(api, "Task #1: Flaky")
        health = (await store.loop_values())[CHAT_HEALTH_KEY]
    assert api.throttle == 0
    assert isinstance(health, dict)
    assert health["state"] == "up"  # never said to be down
