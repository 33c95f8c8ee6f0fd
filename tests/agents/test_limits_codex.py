"""Limits, refusals and runs cut short with the real Codex through the real
`vigil`, against the local model server.

What Codex 0.171.0 prints: for a plan's usage limit (a 429 ``usage_limit_reached``
with ``resets_at``), "You've hit your usage limit. … try again at 2:23 AM." (local
time, cut to the minute); for an API key's 429, whatever its ``retry-after`` (it
waits that long before its own retry, silently), "exceeded retry limit, last
status: 429 Too Many Requests" and no time at all; for a 400, the API's JSON error
body as it came.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from dispatch.process import group_alive
from tests.agents.clis import needs_codex
from tests.agents.codex_home import CodexHome
from tests.agents.model_server import Silent, Text, Usage
from tests.agents.openai_api import bad_request, openai_server, rate_limited, shell, usage_limit
from tests.agents.outages import alerts_toml, epoch_ms, recorded

pytestmark = [needs_codex, pytest.mark.slow]

MINUTE_MS = 60_000


@pytest.mark.timeout(300)  # safety nets of its waits, longer than pytest's 120 s
def test_a_reset_named_in_the_current_minute_waits_for_its_end_not_for_tomorrow(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url, dispatch={"min_gate": "1s"})
        (home.path / "vigil.toml").write_text((home.path / "vigil.toml").read_text() + alerts_toml(events))
        task_id = home.add_task("Say hello")
        # Codex names the minute; the gate must end with it. Started late in a minute,
        # a slow run would reach the gate after that end, and the gate's floor
        # (min_gate) would rightly push it later: start early in one.
        if time.time() % 60 > 30:
            time.sleep(61 - time.time() % 60)
        reset_s = int(time.time()) + 1  # the limit lifts within the minute Codex names
        # met once more when Vigil comes back at the end of that minute, then gone
        api.script.set([usage_limit(reset_s), usage_limit(reset_s), Text("Hello at last.")])
        loop = home.start("run")
        try:
            home.wait_for(lambda: home.gate()["state"] == "gated", timeout_s=60)
            first_gate = home.gate()
            home.wait_for(lambda: home.task(task_id)["status"] == "completed", timeout_s=150)
        finally:
            home.stop(loop)
    runs = home.runs(task_id)
    assert [run["outcome"] for run in runs] == ["usage_limited", "usage_limited", "success"]
    named = datetime.fromtimestamp(reset_s).strftime("%-I:%M %p")
    assert f"try again at {named}" in runs[0]["error"]  # what Codex printed
    # the end of the minute it named: the limit has lifted by then, and it is today
    end_of_minute = (reset_s * 1000 // MINUTE_MS + 1) * MINUTE_MS
    assert epoch_ms(first_gate["until"]) == end_of_minute
    assert runs[1]["started_at"] >= end_of_minute
    # met again: read as past (the floor decides), never as tomorrow's 'try again at'
    assert runs[2]["started_at"] - runs[1]["finished_at"] < 10 * MINUTE_MS
    assert home.task(task_id)["attempt_count"] == 1
    assert recorded(events, "gate_changed") == []  # held a minute: nothing a person needs to hear


def test_an_api_keys_429_names_no_time_and_waits_a_short_backoff_not_an_hour(tmp_path: Path) -> None:
    with openai_server() as api:
        dispatch = {"retry_backoff": "4s", "min_gate": "1s"}
        home = CodexHome.create(tmp_path, api.server.url, dispatch=dispatch)
        task_id = home.add_task("Say hello")
        api.script.set([rate_limited(retry_after_s=1)] * 2)
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "usage_limited"
    assert "exceeded retry limit, last status: 429 Too Many Requests" in run["error"]
    # the limit as recorded (`vigil status` says "free" once its few seconds are over)
    (stored,) = home.rows("SELECT value FROM loop_state WHERE key = 'accounts'")
    (limited,) = json.loads(stored["value"]).items()
    assert limited[0] == "codex:default"
    # no time named: the first step of a backoff (2-4 s), not usage_limit_fallback's hour
    assert 0 < limited[1]["until"] - run["finished_at"] < MINUTE_MS
    assert home.task(task_id)["attempt_count"] == 0


def test_a_400_is_a_failure_that_says_the_api_refused_the_request(tmp_path: Path) -> None:
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        task_id = home.add_task("Say hello")
        api.script.set([bad_request()] * 2)
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "failed"
    assert run["error"] == (
        "the API refused the request (invalid_request_error): Invalid 'input': text must not be empty"
    )
    assert home.task(task_id)["status"] == "failed"


def test_a_run_that_would_pass_its_tasks_max_cost_is_ended_response_by_response(tmp_path: Path) -> None:
    """``codex exec`` reports usage in its stream only when its one turn ends; its
    session file has it after each response, and the run is held to it."""
    events = tmp_path / "events.jsonl"
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        (home.path / "vigil.toml").write_text((home.path / "vigil.toml").read_text() + alerts_toml(events))
        task_id = home.add_task("Spend carefully", "--max-cost", "0.2")
        big = Usage(input=100_000, output=10, cache_read=0, cache_write=0)  # $0.125 each at gpt-5's $1.25/M input
        api.script.set([shell("sleep 1; echo one", usage=big), shell("sleep 1; echo two", usage=big)] * 3)
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "over_budget", run["error"]
    assert "past the task's max_cost_usd of $0.20" in run["error"]
    assert run["tokens_in"] >= 200_000
    assert run["cost_usd"] > 0.2
    assert not group_alive(run["pgid"])
    assert [line for line in home.transcript(run) if line.get("type") == "turn.completed"] == []  # cut mid-turn
    assert home.task(task_id)["status"] == "failed"
    (alert,) = recorded(events, "task_failed")
    assert alert["outcome"] == "over_budget"


def test_a_model_that_goes_silent_is_ended_after_the_stall_timeout(tmp_path: Path) -> None:
    with openai_server() as api:
        # Codex's own idle timeout for a stream is 20 s here: the stall comes first
        home = CodexHome.create(tmp_path, api.server.url, dispatch={"stall_timeout": "8s", "min_gate": "1s"})
        task_id = home.add_task("Say hello")
        api.script.set([Silent(hold_s=600)] * 3)
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "stalled"
    assert run["error"] == "stalled: the agent printed nothing for 8s; its process group was ended"
    assert not group_alive(run["pgid"])
    task = home.task(task_id)
    assert (task["status"], task["attempt_count"]) == ("pending", 1)  # retried later, as a transient failure
