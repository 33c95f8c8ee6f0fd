"""Done when: a person answers an agent's question from the chat alone, and the
real Claude Code resumes its session with the answer (the scripted model server of
tests/agents; ``vigil chat run`` against the scripted Bot API). The agent's shell
does not see the bot's token, though the operator's environment holds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents import anthropic_api
from tests.agents.clis import needs_claude
from tests.agents.model_server import Text
from tests.agents.test_wall import claude_agent
from tests.chat.bot_api import TOKEN, bot_api
from tests.chat.support import PERSON, cards_to, chat_toml
from tests.daemon.conftest import wait_until
from vigil.chat.pairing import CURSOR_KEY

pytestmark = [pytest.mark.slow, needs_claude]

QUESTION = "Deploy to staging or to prod?"
WAIT_S = 90.0


def test_a_reply_in_the_chat_answers_and_claude_code_resumes_its_session(tmp_path: Path) -> None:
    with anthropic_api.anthropic_server() as model, bot_api() as api:
        agent = claude_agent(tmp_path, model)
        home = agent.home
        with (home.path / "vigil.toml").open("a") as config:
            config.write(chat_toml(api))
        task_id = home.add_task("Deploy the release")  # (the database made before anything reads it)
        bot = home.start("chat", "run", VIGIL_TELEGRAM_TOKEN=TOKEN)
        try:
            wait_until(
                "the bot to follow the audit trail",
                lambda: home.rows("SELECT 1 FROM loop_state WHERE key = ?", CURSOR_KEY),
                WAIT_S,
            )
            agent.script.add(
                agent.shell("env"),
                agent.vigil("ask", question=QUESTION, choices=["staging", "prod"]),
                Text("I asked which environment to deploy to."),
            )
            asked = home.vigil("dispatch", "once", VIGIL_TELEGRAM_TOKEN=TOKEN)
            assert asked.returncode == 0, asked.stderr
            shell = agent.tool_outputs()[0]
            assert "PATH=" in shell  # the agent's shell ran env
            assert TOKEN not in shell
            assert "VIGIL_TELEGRAM_TOKEN" not in shell
            assert home.task(task_id)["status"] == "waiting"

            wait_until("the question's card", lambda: cards_to(api, PERSON, QUESTION), WAIT_S)
            (card,) = cards_to(api, PERSON, QUESTION)
            assert [b["text"] for row in card["reply_markup"]["inline_keyboard"] for b in row] == ["staging", "prod"]
            api.say(PERSON, "staging, after the freeze", reply_to=card)
            wait_until("the answer stored", lambda: home.task(task_id)["status"] == "pending", WAIT_S)
        finally:
            home.stop(bot)
        assert api.problems == []
        assert home.notes(task_id) == [
            (f"human via telegram @ada{PERSON} ({PERSON})", "answer: staging, after the freeze")
        ]

        agent.script.add(agent.vigil("close", status="completed", summary="deployed to staging"), Text("Deployed."))
        before = len(model.conversation())
        resumed = home.vigil("dispatch", "once")
        assert resumed.returncode == 0, resumed.stderr
        task = home.task(task_id)
        assert (task["status"], task["result_summary"], task["attempt_count"]) == (
            "completed",
            "deployed to staging",
            1,
        )
        first, second = home.runs(task_id)
        assert (second["outcome"], second["resumed_from"]) == ("success", first["id"])
        request = model.conversation()[before]  # the resumed run's first request to the model
        assert QUESTION in json.dumps(request)  # the earlier conversation, the agent's own question in it
        last = json.dumps(request["messages"][-1])
        assert "A person answered your question" in last
        assert "staging, after the freeze" in last
