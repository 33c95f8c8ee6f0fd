"""The local model server speaks the Messages API well enough for the real Claude Code."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agents.anthropic_api import anthropic_server
from tests.agents.clis import claude_env, claude_path, needs_claude
from tests.agents.model_server import Text, ToolCall, Usage, overloaded

pytestmark = [needs_claude, pytest.mark.slow]


def run_claude(url: str, tmp_path: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    proc = subprocess.run(
        [str(claude_path()), "--print", "--verbose", "--output-format", "stream-json", *args],
        check=False,
        input="Say something.",
        capture_output=True,
        text=True,
        env=claude_env(url, tmp_path / "config"),
        cwd=work,
        timeout=60,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, lines


def test_a_scripted_answer_comes_back_with_its_usage(tmp_path: Path) -> None:
    with anthropic_server() as api:
        api.script.add(Text("Hello from the script.", Usage(input=100, output=20, cache_read=300, cache_write=40)))
        code, lines = run_claude(api.server.url, tmp_path)
    result = lines[-1]
    assert code == 0
    assert result["type"] == "result"
    assert result["is_error"] is False
    assert result["result"] == "Hello from the script."
    assert result["usage"]["cache_read_input_tokens"] == 300
    assert result["usage"]["cache_creation_input_tokens"] == 40
    assert result["total_cost_usd"] > 0
    assert len(api.conversation()) == 1
    assert api.server.requests[0].headers["x-api-key"] == "sk-ant-test-0000"


def test_a_scripted_tool_call_is_run_and_its_result_sent_back(tmp_path: Path) -> None:
    with anthropic_server() as api:
        api.script.add(ToolCall("Bash", {"command": "echo scripted-42"}), Text("Ran it."))
        code, lines = run_claude(api.server.url, tmp_path, "--allowedTools", "Bash(echo:*)")
        second = api.conversation()[1]
    assert code == 0
    assert lines[-1]["result"] == "Ran it."
    tool_results = [
        block
        for message in second["messages"]
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert len(tool_results) == 1
    assert not tool_results[0].get("is_error"), tool_results
    assert "scripted-42" in json.dumps(tool_results[0]["content"])
    assert lines[-1]["num_turns"] == 2


def test_an_overloaded_server_is_retried_by_the_cli_then_reported(tmp_path: Path) -> None:
    with anthropic_server() as api:
        api.script.set([overloaded(retry_after_s=0)] * 5)
        code, lines = run_claude(api.server.url, tmp_path)
    retries = [line for line in lines if line.get("subtype") == "api_retry"]
    assert code == 1
    assert retries
    assert retries[0]["error_status"] == 529
    assert lines[-1]["is_error"] is True
