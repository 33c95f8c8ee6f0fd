"""The real Claude Code through the real `vigil`, against the local model server:
what each way a run can end leaves in the store.

Each home changes nothing but the executor line and the CLI's path (and what a
test is about); the key, the server's URL and the CLI's switches come from the
operator's environment, as for a new user. Claude Code retries a failed API call
once here (``CLAUDE_CODE_MAX_RETRIES=1``), so error tests take seconds, not minutes.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.process import group_alive
from tests.agents.anthropic_api import anthropic_server, vigil_tool
from tests.agents.clis import needs_claude
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Cut, Slow, Text, ToolCall, Usage, rate_limited, server_error, unauthorized

pytestmark = [needs_claude, pytest.mark.slow]


def test_the_agent_notes_and_closes_its_task_through_vigils_tools(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Look at the inbox")
        usage = Usage(input=200, output=50, cache_read=1000, cache_write=100)
        api.script.add(
            replace(vigil_tool("note", text="two files, both invoices"), usage=usage),
            replace(vigil_tool("close", status="completed", summary="filed both"), usage=usage),
            Text("Filed both invoices.", usage),
        )
        proc = home.vigil("dispatch", "once")
        first = api.conversation()[0]
    assert proc.returncode == 0, proc.stderr
    prompt = json.dumps(first["messages"][0]["content"])
    assert "`close` with status `completed`" in prompt
    assert f"vigil task close {task_id}" not in prompt  # no shell command to compose
    offered = {tool["name"] for tool in first["tools"]}
    assert {"mcp__vigil__note", "mcp__vigil__close", "mcp__vigil__add_followup", "mcp__vigil__show"} <= offered
    task = home.task(task_id)
    assert task["status"] == "completed"
    assert task["result_summary"] == "filed both"
    assert home.notes(task_id) == [("agent", "two files, both invoices")]
    assert home.completed_by(task_id) == ["agent"]
    (run,) = home.runs(task_id)
    assert run["outcome"] == "success"
    assert run["permission_denials"] is None
    assert run["tokens_in"] == 3 * 200
    assert run["tokens_out"] == 3 * 50
    assert run["cache_read_tokens"] == 3 * 1000
    assert run["cache_write_tokens"] == 3 * 100
    # the cost is the CLI's own total_cost_usd, as its result line says
    (result,) = [line for line in home.transcript(run) if line.get("type") == "result"]
    assert run["cost_usd"] == result["total_cost_usd"]
    assert run["cost_usd"] > 0


def test_a_plain_answer_completes_the_task_through_vigil_run(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Say hello")
        api.script.add(Text("Hello, done.", Usage(input=10, output=5, cache_read=0, cache_write=0)))
        loop = home.start("run")
        try:
            home.wait_for(lambda: home.task(task_id)["status"] == "completed")
        finally:
            home.stop(loop)
    task = home.task(task_id)
    assert task["result_summary"] == "Hello, done."
    (run,) = home.runs(task_id)
    assert (run["outcome"], run["tokens_in"], run["tokens_out"]) == ("success", 10, 5)
    assert run["model"] is not None


def test_the_vigil_command_in_bash_is_a_denial_that_never_gates_the_loop(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Close me")
        command = f'vigil task close {task_id} --status completed --summary "done"'
        api.script.add(ToolCall("Bash", {"command": command}), Text("I could not close it."))
        proc = home.vigil("dispatch", "once")
        shown = home.vigil("task", "show", str(task_id))
        gate = home.gate()
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "success"
    assert json.loads(run["permission_denials"]) == [f"Bash: {command}"]
    assert f"denied: Bash: {command}" in shown.stdout
    # the agent did not close it and was refused something: a person reviews it
    task = home.task(task_id)
    assert (task["status"], task["review"], task["denials"]) == ("blocked", "pending", 1)
    assert gate["state"] == "running"


def test_a_write_outside_the_workspace_is_a_recorded_denial(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.txt"
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Tidy up")
        api.script.add(ToolCall("Write", {"file_path": str(outside), "content": "x"}), Text("Could not tidy."))
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "success"
    (denial,) = json.loads(run["permission_denials"])
    assert denial.startswith("Write: ")
    assert str(outside) in denial
    assert not outside.exists()


def test_a_refused_key_gives_the_task_back_and_gates_the_loop_at_the_first_retry(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Anything")
        api.script.set([unauthorized()] * 20)
        # Ten retries would take minutes: the executor stops at the first one.
        proc = home.vigil("dispatch", "once", CLAUDE_CODE_MAX_RETRIES="10")
        gate = home.gate()
        calls = len(api.conversation())
        task = home.task(task_id)
        # the key is fixed, a person resumes: the same task runs again and completes
        api.script.set([Text("Done after all.")])
        gated = home.vigil("dispatch", "once")
        assert home.vigil("resume").returncode == 0
        again = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    assert (task["status"], task["attempt_count"]) == ("pending", 0)
    first, second = home.runs(task_id)
    assert first["outcome"] == "auth"
    assert "HTTP 401 authentication_failed" in first["error"]
    assert calls <= 2
    assert gate["state"] == "gated"
    assert gate["until"] is None  # a person must act
    assert "resume" in gate["reason"]
    assert gated.returncode == 3  # nothing is claimed past the gate
    assert again.returncode == 0, again.stderr
    assert second["outcome"] == "success"
    task = home.task(task_id)
    assert (task["status"], task["attempt_count"]) == ("completed", 1)


def test_an_api_keys_429_naming_no_wait_gives_the_task_back_and_backs_off(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, dispatch={"usage_limit_fallback": "2h"})
        task_id = home.add_task("Anything")
        # a retry-after this long makes Claude Code give up at once, naming no wait
        api.script.set([rate_limited(reset_epoch_s=2_000_000_000, retry_after_s=100)] * 5)
        proc = home.vigil("dispatch", "once")
        gate = home.gate()
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "usage_limited"
    # what Claude Code 2.1.197 prints for an API key's 429 (no reset time in it)
    assert "Request rejected (429)" in run["error"]
    assert [line for line in home.transcript(run) if line.get("subtype") == "api_retry"] == []
    task = home.task(task_id)
    assert (task["status"], task["attempt_count"]) == ("pending", 0)
    # its only account is limited: the loop waits the first step of a backoff (at
    # least the 30 s floor), not the 2 h that usage_limit_fallback allows at most
    assert gate["state"] == "gated"
    (stored,) = home.rows("SELECT value FROM loop_state WHERE key = 'gate'")
    assert 30_000 <= json.loads(stored["value"])["until"] - run["finished_at"] < 120_000


def test_a_subscriptions_usage_limit_waits_for_its_reset_time(tmp_path: Path) -> None:
    reset_s = int(time.time()) + 3 * 3600
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Anything")
        api.script.set([rate_limited(reset_epoch_s=reset_s)] * 5)
        # a subscription's token instead of an API key: Claude Code reads the
        # limit's headers, says when it resets, and does not retry
        env = home.env(CLAUDE_CODE_OAUTH_TOKEN="sk-ant-oat01-test-token")
        del env["ANTHROPIC_API_KEY"]
        proc = home.vigil_with_env("dispatch", "once", env=env)
        gate = home.gate()
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "usage_limited"
    assert "You've hit your session limit" in run["error"]
    task = home.task(task_id)
    assert (task["status"], task["attempt_count"]) == ("pending", 0)
    assert gate["state"] == "gated"  # its only account is limited until resetsAt
    assert gate["until"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(reset_s))


def test_overload_ends_transient_with_the_retries_visible_while_they_happen(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Anything")
        api.script.set([server_error(retry_after_s=3)] * 5)
        once = home.start("dispatch", "once", CLAUDE_CODE_MAX_RETRIES="2")
        try:
            seen = home.wait_for(lambda: (home.status()["dispatcher"].get("task") or {}).get("note"))
            home.wait_for(lambda: once.poll() is not None, timeout_s=60)
        finally:
            home.stop(once)
        after = home.status()["dispatcher"].get("task")
    assert str(seen).startswith("API retry 1/2, next in 3 s (500")
    (run,) = home.runs(task_id)
    assert run["outcome"] == "transient"
    assert "500" in run["error"]
    task = home.task(task_id)
    assert (task["status"], task["attempt_count"]) == ("pending", 1)  # retried later, the attempt counted
    assert after is None or after.get("note") is None


def test_a_timeout_ends_the_whole_process_group(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, dispatch={"timeout": "5s"})
        task_id = home.add_task("Think for a long time")
        api.script.add(Slow(120, Text("too late")))
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "timeout"
    assert run["pgid"] is not None
    # nothing of the group lives on (a zombie a dead parent left unreaped is not alive)
    assert not group_alive(run["pgid"])


def test_the_budget_cap_ends_the_run_as_budget(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, claude={"max_budget_usd": 0.01})
        task_id = home.add_task("Spend a lot")
        big = Usage(input=100_000, output=10_000, cache_read=0, cache_write=0)
        api.script.add(ToolCall("Bash", {"command": "echo step"}, usage=big), Text("done", big), Text("done", big))
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "budget"
    assert run["cost_usd"] > 0.01
    assert home.task(task_id)["status"] == "failed"


def test_max_turns_ends_the_run_as_turns(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, claude={"extra_args": ["--max-turns", "1"]})
        task_id = home.add_task("Take many turns")
        api.script.add(ToolCall("Bash", {"command": "echo one"}), ToolCall("Bash", {"command": "echo two"}))
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "turns"
    assert home.task(task_id)["status"] == "failed"


def test_an_option_the_cli_rejects_is_a_refused_start_that_gates_the_loop(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, claude={"extra_args": ["--no-such-option"]})
        task_id = home.add_task("Anything")
        proc = home.vigil("dispatch", "once")
        gate = home.gate()
        calls = len(api.server.requests)
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "refused"
    assert "--no-such-option" in run["error"]
    assert home.task(task_id)["status"] == "pending"
    assert gate["state"] == "gated"
    assert "vigil.toml" in gate["reason"]
    assert calls == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="Claude Code refuses bypassPermissions only as root")
def test_bypass_permissions_as_root_is_a_refused_start(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, claude={"permission_mode": "bypassPermissions"})
        task_id = home.add_task("Anything")
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "refused"
    assert "cannot be used with root/sudo privileges" in run["error"]


def test_the_agent_works_in_the_tasks_working_directory(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Where am I", "--workdir", str(repo))
        api.script.add(ToolCall("Bash", {"command": "pwd"}), Text("Found it."))
        proc = home.vigil("dispatch", "once")
        second = api.conversation()[1]
    assert proc.returncode == 0, proc.stderr
    assert home.runs(task_id)[0]["outcome"] == "success"
    results = [
        block
        for message in second["messages"]
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert str(repo.resolve()) in json.dumps(results)


def test_no_key_and_no_login_is_auth(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Anything")
        env = home.env()
        del env["ANTHROPIC_API_KEY"]
        proc = home.vigil_with_env("dispatch", "once", env=env)
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "auth"
    assert "Not logged in" in run["error"]
    assert home.task(task_id)["status"] == "pending"


def test_a_stream_cut_off_is_transient(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Anything")
        api.script.set([Cut()] * 5)
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "transient"
    assert "API Error" in run["error"]
    assert (home.task(task_id)["status"], home.task(task_id)["attempt_count"]) == ("pending", 1)


@pytest.mark.parametrize(("mode", "written"), [("default", False), ("acceptEdits", True)])
def test_permission_mode_decides_whether_the_agent_may_edit_its_working_directory(
    tmp_path: Path, mode: str, written: bool
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    target = repo / "NOTES.md"
    with anthropic_server() as api:
        home = ClaudeHome.make(
            tmp_path, api.server.url, dispatch={"workdir": str(repo)}, claude={"permission_mode": mode}
        )
        task_id = home.add_task("Write notes")
        api.script.add(ToolCall("Write", {"file_path": str(target), "content": "hello\n"}), Text("Wrote them."))
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "success"
    assert target.exists() is written
    denials = json.loads(run["permission_denials"]) if run["permission_denials"] else []
    assert bool(denials) is not written
    assert all(d.startswith("Write: ") for d in denials)
