"""A result on a real repository reviewed from the chat: the card's diff stat,
its flagged files and Diff button (pages, escape-free), then Approve merges the
change into its base as ``vigil task approve`` does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.chat.bot_api import BotApi, bot_api, labels
from tests.chat.support import PERSON, card, cards_to, chat_settings, running_bot, until
from tests.code.repos import Repo
from tests.tui.test_diff_screen import awaiting_review
from vigil.config import Settings
from vigil.store import Store, open_store

pytestmark = pytest.mark.slow  # runs the bot and git for a second or more

ESCAPED = "\x1b[2J\x1b]0;owned\x07"  # clears the screen and retitles a terminal, if shown raw


@pytest.fixture
def api() -> Iterator[BotApi]:
    with bot_api() as running:
        yield running
        assert running.problems == []


@pytest.fixture
def settings(home: Path, api: BotApi) -> Settings:
    return chat_settings(home, api)


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[Store]:
    opened = await open_store(settings)
    yield opened
    await opened.close()


async def test_the_diff_in_pages_then_approve_merges_the_branch(
    api: BotApi, settings: Settings, store: Store, tmp_path: Path
) -> None:
    repo = Repo.make(tmp_path / "app", {"parser.py": f"one\ntwo {ESCAPED}\n", "README.md": "app\n"})
    async with running_bot(settings, store):
        big = {"big.txt": "".join(f"row {n}\n" for n in range(1000)), ".gitattributes": "* -diff\n"}
        task_id, made = await awaiting_review(store, settings, repo, extra=big)
        review = await card(api, "Awaiting your review.")
        assert labels(review) == ["Approve", "Reject…", "Diff"]
        assert "Flagged files: .gitattributes (" in review["text"]  # a file that configures git, first
        api.press(PERSON, review, "Diff")
        first = await card(api, f"Diff of task #{task_id}, page 1 of ")
        pages = int(first["text"].split("page 1 of ", 1)[1].split()[0])
        assert pages > 1  # a thousand lines do not fit one message
        shown = [first]
        while len(shown) < pages:
            assert labels(shown[-1]) == ["More"]
            api.press(PERSON, shown[-1], "More")
            shown.append(await card(api, f"Diff of task #{task_id}, page {len(shown) + 1} of {pages}"))
        assert labels(shown[-1]) == []  # the last page
        whole = "".join(page["text"] for page in shown)
        assert "+row 999" in whole
        assert "parser.py" in whole
        assert "\\x1b[2J" in whole  # shown, not obeyed
        assert "\x1b" not in whole
        api.press(PERSON, review, "Approve")
        await until(lambda: api.edits, "the card edited")
    task = await store.get_task(task_id)
    assert task.status == "completed"
    assert task.worktree is not None
    assert task.worktree.merged is not None
    assert repo.show("main", "parser.py") == "one\n2"  # the branch's change, merged into main
    assert f"→ task #{task_id} approved; completed; {made.branch} merged into main" in api.edits[-1]["text"]
    assert not cards_to(api, PERSON, "not done")
