"""A dispatcher killed mid-run: the next attempt resumes the agent's session, and
the interrupted run is recorded with what it spent, read from the CLI's own
session file. With the real Claude Code and Codex against the scripted model server.

The agent makes two model calls (a note each through Vigil's MCP server), its third
call hangs, and the dispatcher (a real ``vigil run``) is killed with SIGKILL:

* with Claude Code, the agent's process group is left running, as a crash leaves
  it; the next dispatcher ends it before it settles the run;
* with Codex, the agent's group is killed too, as a power cut would.

A new ``vigil run`` records the run ``interrupted`` with the tokens of both calls
(and their cost at the price table) and its session id; the next attempt is
given that session (``--resume`` / ``resume THREAD``), the model sees the earlier
conversation, and the task completes.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.agents import anthropic_api, openai_api
from tests.agents.clis import needs_claude, needs_codex
from tests.agents.codex_home import CodexHome
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Reply, Script, Silent, Text, Usage

pytestmark = pytest.mark.slow

WAIT_S = 180  # a safety net for a loaded machine, not a measurement
DISPATCH = {"retry_backoff": "1s"}


@dataclass
class Crash:
    """One CLI's home, its model server's script, what the server was asked, how
    its model calls a Vigil tool, and whether the crash takes the agent down too."""

    home: ClaudeHome
    script: Script
    requests: Callable[[], list[dict[str, Any]]]  # the bodies of the agent's requests so far
    vigil: Callable[..., Reply]
    kill_agent: bool


@contextmanager
def claude_crash(tmp_path: Path) -> Iterator[Crash]:
    with anthropic_api.anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, dispatch=DISPATCH)
        yield Crash(home, api.script, api.conversation, anthropic_api.vigil_tool, kill_agent=False)


@contextmanager
def codex_crash(tmp_path: Path) -> Iterator[Crash]:
    with openai_api.openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url, dispatch=DISPATCH)
        yield Crash(home, api.script, api.requests, openai_api.vigil_tool, kill_agent=True)


CLIS = [
    pytest.param(claude_crash, id="claude", marks=needs_claude),
    pytest.param(codex_crash, id="codex", marks=needs_codex),
]


def _prompt_records(home: ClaudeHome, run: Any) -> list[dict[str, Any]]:
    return [line for line in home.transcript(run) if line.get("type") == "vigil.prompt"]


@pytest.mark.timeout(WAIT_S * 3)  # its waits' safety nets, longer than pytest's own
@pytest.mark.parametrize("crash_with", CLIS)
def test_after_a_dispatcher_crash_the_next_attempt_resumes_the_session(
    tmp_path: Path, crash_with: Callable[[Path], Any]
) -> None:
    with crash_with(tmp_path) as crash:
        home = crash.home
        task_id = home.add_task("Write the report")
        crash.script.add(
            crash.vigil("note", text="first step done"),
            crash.vigil("note", text="second step done"),
            Silent(hold_s=WAIT_S),  # the third call hangs: the dispatcher dies meanwhile
        )
        first = home.start("run")
        try:
            home.wait_for(lambda: len(crash.requests()) >= 3, WAIT_S)
            (run,) = home.runs(task_id)
            assert run["finished_at"] is None
            assert run["pgid"]
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
            if crash.kill_agent:
                os.killpg(run["pgid"], signal.SIGKILL)
            else:
                os.killpg(run["pgid"], 0)  # a crash leaves the agent running
        finally:
            home.stop(first)
        assert home.notes(task_id) == [("agent", "first step done"), ("agent", "second step done")]
        before = len(crash.requests())

        crash.script.set(
            [crash.vigil("close", status="completed", summary="report written after the crash"), Text("Done.")]
        )
        second = home.start("run")
        try:
            home.wait_for(lambda: home.task(task_id)["status"] == "completed", WAIT_S)
        finally:
            home.stop(second)

        interrupted, resumed = home.runs(task_id)
        assert interrupted["outcome"] == "interrupted"
        assert "dispatcher died" in interrupted["error"]
        with pytest.raises(ProcessLookupError):  # the orphaned agent was ended
            os.killpg(run["pgid"], 0)
        # the two calls the interrupted run made, from the CLI's session file
        calls = Usage()  # what the server reports for each call
        assert (
            interrupted["tokens_in"],
            interrupted["tokens_out"],
            interrupted["cache_read_tokens"],
            interrupted["cache_write_tokens"],
        ) == (2 * calls.input, 2 * calls.output, 2 * calls.cache_read, 2 * calls.cache_write)
        assert interrupted["api_cost_usd"] > 0  # priced by the shipped table
        assert interrupted["cost_usd"] == interrupted["api_cost_usd"]
        assert interrupted["session_id"]
        assert interrupted["transcript_path"]
        assert interrupted["account"] == "default"

        # the next attempt continued that session, and the model saw the earlier conversation
        assert (resumed["outcome"], resumed["resumed_from"]) == ("success", interrupted["id"])
        (record,) = _prompt_records(home, resumed)
        assert interrupted["session_id"] in record["argv"]
        assert "ended early: interrupted" in record["text"]
        asked = crash.requests()[before]
        assert "second step done" in json.dumps(asked)
        assert "ended early: interrupted" in json.dumps(asked)
        # the resumed run counts only its own call, not the session's earlier ones
        assert resumed["tokens_in"] == calls.input * (len(crash.requests()) - before)
        task = home.task(task_id)
        assert (task["attempt_count"], task["result_summary"]) == (2, "report written after the crash")
        assert task["tokens_in"] == interrupted["tokens_in"] + resumed["tokens_in"]
