"""The real Claude Code through the real `vigil`, against the local model server:
what each way a run can end leaves in the store."""

from __future__ import annotations

from pathlib import Path

from tests.agents.anthropic_api import anthropic_server
from tests.agents.clis import needs_claude
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Text, ToolCall, Usage

pytestmark = needs_claude


def test_the_agent_notes_and_closes_its_task_through_vigil(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Look at the inbox")
        usage = Usage(input=200, output=50, cache_read=1000, cache_write=100)
        api.script.add(
            ToolCall("Bash", {"command": f'vigil task note {task_id} "two files, both invoices"'}, usage=usage),
            ToolCall(
                "Bash",
                {"command": f'vigil task close {task_id} --status completed --summary "filed both"'},
                usage=usage,
            ),
            Text("Filed both invoices.", usage),
        )
        proc = home.vigil("dispatch", "once")
        prompt = api.conversation()[0]["messages"][0]["content"]
    assert proc.returncode == 0, proc.stderr
    assert f"vigil task close {task_id} --status completed" in str(prompt)
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
    assert run["outcome"] == "success"
    assert run["cost_usd"] > 0
    assert run["tokens_in"] == 3 * 200
    assert run["cache_read_tokens"] == 3 * 1000
    assert run["cache_write_tokens"] == 3 * 100
    assert run["tokens_out"] == 3 * 50
    # the cost is the CLI's own total_cost_usd, as its result line says
    (result,) = [line for line in home.transcript(run) if line.get("type") == "result"]
    assert run["cost_usd"] == result["total_cost_usd"]
