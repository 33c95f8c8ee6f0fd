"""The agent asks, a person answers, the agent carries on in its own session: with
the real Claude Code and Codex against the scripted model server.

* the agent calls Vigil's ``ask``; the run is recorded as ``asked``, the task waits
  with the question, and an apprise ``json://`` notifier on a local HTTP server is
  told;
* a person answers with ``vigil task answer``; the next run's argv resumes the first
  run's session (``claude --resume``, ``codex exec … resume``), the model receives
  the earlier conversation with the answer as the new message, and the task
  completes with one attempt counted;
* a session that cannot be resumed falls back to a fresh run whose prompt holds the
  question and the answer.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.agents import anthropic_api, openai_api
from tests.agents.clis import needs_claude, needs_codex
from tests.agents.model_server import Text
from tests.agents.test_wall import Agent, claude_agent, codex_agent
from tests.http_sink import http_sink

pytestmark = pytest.mark.slow

QUESTION = "Deploy to staging or to prod?"


@dataclass
class Asker:
    """An agent (``test_wall.Agent``) and what these tests read from its model
    server and its CLI's own files."""

    agent: Agent
    requests: Callable[[], list[dict[str, Any]]]  # the bodies of the CLI's requests to the model so far
    user_text: Callable[[dict[str, Any]], str]  # the text of the last user message of a request
    forget_sessions: Callable[[], None]  # delete the CLI's record of its sessions


def with_claude(tmp_path: Path, test: Callable[[Asker], None]) -> None:
    with anthropic_api.anthropic_server() as api:
        agent = claude_agent(tmp_path, api)

        def user_text(request: dict[str, Any]) -> str:
            content = request["messages"][-1]["content"]
            blocks = [content] if isinstance(content, str) else content
            return "\n".join(b if isinstance(b, str) else str(b.get("text", "")) for b in blocks)

        test(
            Asker(
                agent,
                api.conversation,
                user_text,
                lambda: shutil.rmtree(agent.home.config_dir / ".claude" / "projects"),
            )
        )


def with_codex(tmp_path: Path, test: Callable[[Asker], None]) -> None:
    with openai_api.openai_server() as api:
        agent = codex_agent(tmp_path, api)

        def user_text(request: dict[str, Any]) -> str:
            items = [i for i in request["input"] if isinstance(i, dict) and i.get("role") == "user"]
            return "\n".join(str(part.get("text", "")) for part in items[-1]["content"])

        test(
            Asker(
                agent,
                api.requests,
                user_text,
                lambda: shutil.rmtree(agent.home.config_dir / "sessions"),
            )
        )


ASKERS = [
    pytest.param(with_claude, id="claude", marks=needs_claude),
    pytest.param(with_codex, id="codex", marks=needs_codex),
]
AskRunner = Callable[[Path, Callable[[Asker], None]], None]


def _prompt_record(agent: Agent, run: Any) -> dict[str, Any]:
    """The run's first transcript record: the argv Vigil ran and what it sent on stdin."""
    records = [line for line in agent.home.transcript(run) if line.get("type") == "vigil.prompt"]
    return records[0]


def _ask(agent: Agent) -> int:
    """A task whose agent asks QUESTION (choices staging, prod) and ends its turn."""
    home = agent.home
    task_id = home.add_task("Deploy the release")
    agent.script.add(
        agent.vigil("ask", question=QUESTION, choices=["staging", "prod"]),
        Text("I asked which environment to deploy to."),
    )
    proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    return task_id


@pytest.mark.parametrize("run_with", ASKERS)
def test_the_agent_asks_a_person_answers_and_the_session_resumes(tmp_path: Path, run_with: AskRunner) -> None:
    def test(asker: Asker) -> None:
        agent = asker.agent
        home = agent.home
        with http_sink() as sink:
            with (home.path / "vigil.toml").open("a") as config:
                config.write(f"\n[alerts]\nnotify = [{json.dumps(sink.url())}]\n")
            task_id = _ask(agent)
        ((_, notified),) = sink.received  # a person is told, with how to answer
        assert notified["title"] == f"vigil: task #{task_id} waits for an answer: {QUESTION}"
        assert f'vigil task answer {task_id} "…" (or --choice N)' in notified["message"]
        task = home.task(task_id)
        assert (task["status"], task["question"], json.loads(task["choices"])) == (
            "waiting",
            QUESTION,
            ["staging", "prod"],
        )
        (asked,) = home.runs(task_id)
        assert (asked["outcome"], task["attempt_count"]) == ("asked", 0)
        assert asked["session_id"]
        answered = home.vigil("task", "answer", str(task_id), "--choice", "1")
        assert answered.returncode == 0, answered.stderr
        agent.script.add(agent.vigil("close", status="completed", summary="deployed to staging"), Text("Deployed."))
        before = len(asker.requests())
        proc = home.vigil("dispatch", "once")
        assert proc.returncode == 0, proc.stderr
        task = home.task(task_id)
        assert (task["status"], task["result_summary"], task["attempt_count"]) == (
            "completed",
            "deployed to staging",
            1,
        )
        first, second = home.runs(task_id)
        assert (second["outcome"], second["resumed_from"]) == ("success", first["id"])
        record = _prompt_record(agent, second)
        argv = record["argv"]
        assert first["session_id"] in argv
        assert ("--resume" in argv) or ("resume" in argv)
        assert "A person answered your question" in record["text"]
        assert "staging" in record["text"]
        assert "# The task" not in record["text"]  # the new message only, not a whole prompt
        resumed = asker.requests()[before]  # the resumed run's first request to the model
        assert QUESTION in json.dumps(resumed)  # the earlier conversation: the agent's own ask
        assert "A person answered your question" in asker.user_text(resumed)
        assert "staging" in asker.user_text(resumed)
        assert home.notes(task_id) == [("human", "answer: staging")]

    run_with(tmp_path, test)


@pytest.mark.parametrize("run_with", ASKERS)
def test_a_session_that_cannot_be_resumed_falls_back_to_a_fresh_run_with_the_answer(
    tmp_path: Path, run_with: AskRunner
) -> None:
    def test(asker: Asker) -> None:
        agent = asker.agent
        home = agent.home
        task_id = _ask(agent)
        (asked,) = home.runs(task_id)
        asker.forget_sessions()  # the CLI's own record of the session is gone
        assert home.vigil("task", "answer", str(task_id), "prod, after the freeze").returncode == 0
        agent.script.add(agent.vigil("close", status="completed", summary="deployed to prod"), Text("Deployed."))
        proc = home.vigil("dispatch", "once")
        assert proc.returncode == 0, proc.stderr
        assert "could not resume its session" in proc.stderr
        task = home.task(task_id)
        assert (task["status"], task["attempt_count"]) == ("completed", 1)
        _, second = home.runs(task_id)
        assert (second["outcome"], second["resumed_from"]) == ("success", None)
        records = [line for line in home.transcript(second) if line.get("type") == "vigil.prompt"]
        assert len(records) == 2  # the refused resume, then the fresh run
        assert asked["session_id"] in records[0]["argv"]
        fresh = records[1]
        assert asked["session_id"] not in fresh["argv"]
        assert f"Question: {QUESTION}" in fresh["text"]
        assert "Answer: prod, after the freeze" in fresh["text"]
        assert "# The task" in fresh["text"]

    run_with(tmp_path, test)
