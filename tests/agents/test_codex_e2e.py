"""The real Codex through the real `vigil`, against the local model server: what
each way a run can end leaves in the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.clis import needs_codex
from tests.agents.codex_home import PRICES, TEST_KEY, CodexHome
from tests.agents.model_server import Text, Usage
from tests.agents.openai_api import openai_server, shell

pytestmark = needs_codex


def test_a_plain_answer_is_a_success_with_its_tokens_and_computed_cost(tmp_path: Path) -> None:
    with openai_server() as api:
        # Codex's events do not name the model: it is priced when Vigil names it
        home = CodexHome.create(tmp_path, api.server.url, codex={"model": "gpt-5-codex"})
        task_id = home.add_task("Say hello")
        api.script.add(Text("Hello from Codex.", Usage(input=200, output=50, cache_read=1000, cache_write=100)))
        proc = home.vigil("dispatch", "once")
        (request,) = api.requests()
        auth = api.server.recorded("/v1/responses")[0].headers["authorization"]
    assert proc.returncode == 0, proc.stderr
    assert not (home.path / ".git").exists()  # a home is no git repository, and Codex runs there all the same
    assert auth == f"Bearer {TEST_KEY}"  # the operator's key reached the agent
    assert "Say hello" in str(request["input"])
    assert request["model"] == "gpt-5-codex"
    (run,) = home.runs(task_id)
    assert run["outcome"] == "success", run["error"]
    assert run["error"] is None
    assert (run["tokens_in"], run["cache_read_tokens"], run["cache_write_tokens"], run["tokens_out"]) == (
        200,
        1000,
        100,
        50,
    )
    expected = (
        200 * PRICES["input"] + 1000 * PRICES["cache_read"] + 100 * PRICES["cache_write"] + 50 * PRICES["output"]
    ) / 1e6
    assert run["cost_usd"] == pytest.approx(expected)
    assert run["api_cost_usd"] == pytest.approx(expected)
    assert run["model"] == "gpt-5-codex"
    assert run["session_id"]
    task = home.task(task_id)
    assert task["status"] == "completed"
    assert task["result_summary"] == "Hello from Codex."


def test_the_agent_notes_and_closes_its_task_from_inside_its_sandbox(tmp_path: Path) -> None:
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        task_id = home.add_task("Look at the inbox")
        api.script.add(
            shell(f"vigil task note {task_id} 'two files, both invoices'"),
            shell(f"vigil task close {task_id} --status completed --summary 'filed both'"),
            Text("Filed both invoices."),
        )
        proc = home.vigil("dispatch", "once")
        first = api.requests()[0]
        turn = api.server.recorded("/v1/responses")[0].headers["x-codex-turn-metadata"]
        outputs = api.tool_outputs()
    assert proc.returncode == 0, proc.stderr
    assert f"vigil task close {task_id} --status completed" in str(first["input"])
    # the default sandbox (workspace-write) is in force, and lets the calls commit
    assert '"sandbox_mode":"workspace-write"' in turn
    assert len(outputs) == 2
    assert all("Process exited with code 0" in output for output in outputs), outputs
    task = home.task(task_id)
    assert task["status"] == "completed"
    assert task["result_summary"] == "filed both"
    notes = home.rows("SELECT author, text FROM notes WHERE task_id = ?", task_id)
    assert [(n["author"], n["text"]) for n in notes] == [("agent", "two files, both invoices")]
    closed = home.rows(
        "SELECT actor FROM task_events WHERE task_id = ? AND kind = 'status' AND to_value = 'completed'", task_id
    )
    assert [e["actor"] for e in closed] == ["agent"]
    (run,) = home.runs(task_id)
    assert run["outcome"] == "success", run["error"]
