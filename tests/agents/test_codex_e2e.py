"""The real Codex through the real `vigil`, against the local model server: what
each way a run can end leaves in the store."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.agents.clis import needs_codex
from tests.agents.codex_home import PRICES, TEST_KEY, CodexHome
from tests.agents.model_server import Cut, Reply, Slow, Text, Usage
from tests.agents.openai_api import openai_server, server_error, shell, unauthorized, usage_limit, vigil_tool

pytestmark = [needs_codex, pytest.mark.slow]


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
    # the scratch workspace is no git repository, and Codex runs there all the same
    assert not (home.path / "work" / str(task_id) / ".git").exists()
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


def test_the_agent_notes_and_closes_its_task_through_vigils_tools(tmp_path: Path) -> None:
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        task_id = home.add_task("Look at the inbox")
        api.script.add(
            vigil_tool("note", text="two files, both invoices"),
            vigil_tool("close", status="completed", summary="filed both"),
            Text("Filed both invoices."),
        )
        proc = home.vigil("dispatch", "once")
        first = api.requests()[0]
        turn = api.server.recorded("/v1/responses")[0].headers["x-codex-turn-metadata"]
        outputs = api.tool_outputs()
    assert proc.returncode == 0, proc.stderr
    assert "`close` with status `completed`" in str(first["input"])
    (vigil,) = [tool for tool in first["tools"] if tool.get("name") == "mcp__vigil"]
    assert {"note", "close", "add_followup", "show"} <= {tool["name"] for tool in vigil["tools"]}
    assert '"sandbox_mode":"workspace-write"' in turn
    assert [output.splitlines()[-1] for output in outputs] == [
        f'{{"result":"noted on task #{task_id}"}}',
        f'{{"result":"task #{task_id} closed as completed"}}',
    ]
    task = home.task(task_id)
    assert task["status"] == "completed"
    assert task["result_summary"] == "filed both"
    assert home.notes(task_id) == [("agent", "two files, both invoices")]
    assert home.completed_by(task_id) == ["agent"]
    (run,) = home.runs(task_id)
    assert run["outcome"] == "success", run["error"]
    assert run["permission_denials"] is None


def test_a_refused_key_is_an_auth_failure_with_the_status(tmp_path: Path) -> None:
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        task_id = home.add_task("Say hello")
        api.script.add(unauthorized(), unauthorized())
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "auth"
    assert "401 Unauthorized" in run["error"]
    assert not run["error"].startswith("Reconnecting")


def test_a_usage_limit_waits_for_the_reset_codex_names_without_counting_the_attempt(tmp_path: Path) -> None:
    reset_s = int(time.time()) + 2 * 3600
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        task_id = home.add_task("Say hello")
        api.script.add(usage_limit(reset_s))
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "usage_limited"
    # Codex prints the reset to the minute: a time of day ("try again at 3:46 PM.") on
    # the same day, with the date before it ("Dec 5th, 2026 12:25 AM.") on another
    clock = datetime.fromtimestamp(reset_s).strftime("%-I:%M %p")
    assert re.search(rf"try again at ([A-Z][a-z]{{2}} \d{{1,2}}[a-z]{{2}}, \d{{4}} )?{clock}\.", run["error"])
    task = home.task(task_id)
    assert task["status"] == "pending"
    assert task["attempt_count"] == 0
    # the account, and with it the loop, waits until the end of the minute Codex named
    gate = home.gate()
    until_ms = datetime.fromisoformat(str(gate["until"]).replace("Z", "+00:00")).timestamp() * 1000
    assert (gate["state"], until_ms) == ("gated", (reset_s * 1000 // 60_000 + 1) * 60_000)


@pytest.mark.parametrize(
    ("replies", "error"),
    [
        ((server_error(), server_error()), "high demand"),
        ((Cut(), Cut()), "stream disconnected before completion"),
    ],
    ids=["5xx", "cut-stream"],
)
def test_server_trouble_after_codex_own_retry_is_transient(
    tmp_path: Path, replies: tuple[Reply, ...], error: str
) -> None:
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        task_id = home.add_task("Say hello")
        api.script.add(*replies)
        proc = home.vigil("dispatch", "once")
        served = api.script.served
    assert proc.returncode == 0, proc.stderr
    assert served == 2  # the request and Codex's one retry
    (run,) = home.runs(task_id)
    assert run["outcome"] == "transient"
    assert error in run["error"]
    assert not run["error"].startswith("Reconnecting")
    retries = [line for line in home.transcript(run) if str(line.get("message", "")).startswith("Reconnecting")]
    assert retries, "Codex's own retry is in the transcript"
    task = home.task(task_id)
    assert task["status"] == "pending"  # retried later, with backoff
    assert task["attempt_count"] == 1


def test_an_unknown_flag_is_a_refusal_with_codex_own_error_line(tmp_path: Path) -> None:
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url, codex={"extra_args": ["--no-such-flag"]})
        task_id = home.add_task("Say hello")
        proc = home.vigil("dispatch", "once")
        asked = api.script.served
    assert proc.returncode == 0, proc.stderr
    assert asked == 0
    (run,) = home.runs(task_id)
    assert run["outcome"] == "refused"
    assert run["error"].endswith("error: unexpected argument '--no-such-flag' found")
    assert "WARNING" not in run["error"]
    # the task did nothing wrong: it is given back, and the loop waits for a person
    task = home.task(task_id)
    assert task["status"] == "pending"
    assert task["attempt_count"] == 0
    status = json.loads(home.vigil("status", "--json").stdout)
    assert status["gate"]["state"] != "running"
    assert status["gate"]["until"] is None
    assert home.vigil("dispatch", "once").returncode == 3  # nothing runs while gated


def test_a_timeout_ends_codex_whole_process_group(tmp_path: Path) -> None:
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url, dispatch={"timeout": "3s"})
        task_id = home.add_task("Say hello")
        api.script.add(Slow(30, Text("too late")))
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "timeout"
    assert run["pgid"]
    with pytest.raises(ProcessLookupError):
        os.killpg(run["pgid"], 0)


def test_vigil_run_hands_tasks_to_codex_until_stopped(tmp_path: Path) -> None:
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        first = home.add_task("First")
        second = home.add_task("Second")
        api.script.add(
            vigil_tool("close", status="completed", summary="first done"),
            Text("First done."),
            vigil_tool("close", status="completed", summary="second done"),
            Text("Second done."),
        )
        loop = home.start("run")
        try:
            deadline = time.monotonic() + 60  # a safety net, not a measurement
            while home.task(second)["status"] != "completed" and time.monotonic() < deadline:
                assert loop.poll() is None, loop.communicate()
                time.sleep(0.2)
        finally:
            loop.send_signal(signal.SIGTERM)
            _, stderr = loop.communicate(timeout=30)
    assert loop.returncode == 0, stderr
    assert [home.task(t)["result_summary"] for t in (first, second)] == ["first done", "second done"]
    assert [run["outcome"] for t in (first, second) for run in home.runs(t)] == ["success", "success"]


def test_codex_own_retry_shows_in_vigil_status_while_it_happens(tmp_path: Path) -> None:
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        task_id = home.add_task("Say hello")
        # a 5xx, Codex says "Reconnecting... 1/1 (…)" and asks again; that answer is slow
        api.script.add(server_error(), Slow(6, Text("Recovered.")))
        loop = home.start("run")
        seen: list[object] = []
        try:
            deadline = time.monotonic() + 60  # a safety net, not a measurement
            while home.task(task_id)["status"] != "completed" and time.monotonic() < deadline:
                assert loop.poll() is None, loop.communicate()
                running = json.loads(home.vigil("status", "--json").stdout)["dispatcher"]["task"]
                if running is not None and running["note"] is not None:
                    seen.append(running["note"])
                time.sleep(0.2)
        finally:
            loop.send_signal(signal.SIGTERM)
            _, stderr = loop.communicate(timeout=30)
    assert loop.returncode == 0, stderr
    assert seen, "the retry never showed in vigil status"
    assert str(seen[0]).startswith("API retry 1/1: ")
    (run,) = home.runs(task_id)
    assert run["outcome"] == "success"
    assert run["error"] is None  # the retry was not the run's error
    assert home.task(task_id)["result_summary"] == "Recovered."


def test_in_its_tasks_folder_the_agent_writes_there_and_only_there(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        task_id = home.add_task("Write the report", "--workdir", str(repo))
        api.script.add(
            shell("pwd > where.txt"),
            shell(f"pwd > {home.path}/where.txt"),
            vigil_tool("note", text="report written"),
            Text("Written."),
        )
        proc = home.vigil("dispatch", "once")
        written, refused, _noted = api.tool_outputs()
    assert proc.returncode == 0, proc.stderr
    assert "Process exited with code 0" in written, written
    assert "Read-only file system" in refused, refused
    # the sandbox let it write in its workspace, not in the home (which is under
    # /tmp here, which Codex's sandbox would let it write: Vigil takes /tmp away)
    assert (repo / "where.txt").read_text().strip() == str(repo)
    assert not (home.path / "where.txt").exists()
    assert home.notes(task_id) == [("agent", "report written")]
    (run,) = home.runs(task_id)
    assert json.loads(run["permission_denials"]) == [
        f"exec_command: pwd > {home.path}/where.txt (blocked: Read-only file system)"
    ]
