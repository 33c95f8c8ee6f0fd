"""Outages and runaway runs with the real Claude Code through the real `vigil`,
against the local model server: a burst of 529s over several tasks, a model that
goes silent, a run that would pass its task's spending limit, a timed-out run that
keeps its tokens, a 400, and what the agent said about each attempt."""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dispatch.process import group_alive
from tests.agents.anthropic_api import anthropic_server, vigil_tool
from tests.agents.clis import needs_claude
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Burst, Silent, Slow, Text, Usage, bad_request, overloaded
from tests.agents.outages import alerts_toml, recorded

pytestmark = [needs_claude, pytest.mark.slow]

BURST_S = 30


def prompt_of(request: dict[str, Any]) -> str:
    """The text of the first user message of a conversation request: the prompt."""
    content = request["messages"][0]["content"]
    return content if isinstance(content, str) else "\n".join(str(block.get("text", "")) for block in content)


@pytest.mark.timeout(400)
def test_a_burst_of_529s_over_six_tasks_is_probed_by_one_task_then_all_follow_with_no_person(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    # two lanes (two `vigil run`), so that "one task at a time" after a backoff is seen;
    # the loop's backoff by time, shortened: 2 s while the outage is young, at most 8 s
    dispatch = {"lanes": 2, "outage_backoff": ["2s", "4s", "8s"], "retry_backoff": "1s", "min_gate": "1s"}
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, dispatch=dispatch, toml=alerts_toml(events))
        tasks = [home.add_task(f"Task {n}") for n in range(1, 7)]
        # the API is overloaded for 30 s, however many requests come, then healthy
        api.script.default = Burst(time.monotonic() + BURST_S, overloaded(), Text("Done."))
        loops = [home.start("run"), home.start("run")]
        try:
            shown = home.wait_for(
                lambda: next((s for s in [home.vigil("status").stdout] if "backing off after" in s), None), 60
            )
            home.wait_for(lambda: all(home.task(t)["status"] == "completed" for t in tasks), timeout_s=300)
        finally:
            for loop in loops:
                home.stop(loop)
    assert re.search(r"loop: backing off after \d transient failures?, next try in ", shown), shown
    runs = sorted((run for task in tasks for run in home.runs(task)), key=lambda run: run["started_at"])
    outcomes = [run["outcome"] for run in runs]
    assert outcomes.count("success") == 6
    assert set(outcomes) == {"transient", "success"}
    # once the first failure backed the loop off, each try is one task: a probe, alone
    backed_off = min(run["finished_at"] for run in runs if run["outcome"] == "transient")
    last_failed = max(run["finished_at"] for run in runs if run["outcome"] == "transient")
    probe = next(run for run in runs if run["started_at"] >= last_failed)
    probes = [run for run in runs if backed_off <= run["started_at"] <= probe["started_at"]]
    assert probes[-1] == probe
    for before, after in itertools.pairwise(probes):
        assert after["started_at"] >= before["finished_at"], (before, after)
    # the probe after the outage got through, and only then did the rest follow
    assert probe["outcome"] == "success"
    after_probe = [run for run in runs if run["started_at"] > probe["started_at"]]
    assert all(run["outcome"] == "success" for run in after_probe)
    assert all(run["started_at"] >= probe["finished_at"] for run in after_probe)
    # the outage ended by itself, in seconds: nothing for a person, no vigil resume
    assert recorded(events, "gate_changed") == []
    assert recorded(events, "task_failed") == []


@pytest.mark.timeout(300)  # safety nets of its waits, longer than pytest's 120 s
def test_a_model_that_goes_silent_is_ended_after_the_stall_timeout_and_retried(tmp_path: Path) -> None:
    dispatch = {"stall_timeout": "15s", "retry_backoff": "1s", "min_gate": "1s"}
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, dispatch=dispatch)
        task_id = home.add_task("Anything")
        api.script.set([Silent(hold_s=600), Text("Done the second time.")])
        loop = home.start("run")
        try:
            home.wait_for(lambda: home.task(task_id)["status"] == "completed", timeout_s=110)
        finally:
            home.stop(loop)
        retry_prompt = prompt_of(api.conversation()[1])
    first, second = home.runs(task_id)
    assert first["outcome"] == "stalled"
    assert first["error"] == "stalled: the agent printed nothing for 15s; its process group was ended"
    assert not group_alive(first["pgid"])
    assert second["outcome"] == "success"
    assert home.task(task_id)["attempt_count"] == 2  # a stall counts, as a transient failure does
    assert "- attempt 1, started" in retry_prompt
    assert "stalled: the agent printed nothing for 15s" in retry_prompt


def test_a_run_that_would_pass_its_tasks_max_cost_is_ended_mid_stream(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, toml=alerts_toml(events))
        task_id = home.add_task("Spend carefully", "--max-cost", "0.6")
        big = Usage(input=100_000, output=10, cache_read=0, cache_write=0)  # $0.50 each at Opus 4's $5/M input
        api.script.set(
            [
                replace(vigil_tool("note", text="step one"), usage=big),
                replace(vigil_tool("note", text="step two"), usage=big),
                Slow(60, Text("too late: the run is over")),
            ]
        )
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "over_budget"
    assert run["error"].startswith("over budget: the run had spent $1.0")
    assert "past the task's max_cost_usd of $0.60" in run["error"]
    assert run["tokens_in"] == 200_000
    assert run["cost_usd"] > 0.6
    assert not group_alive(run["pgid"])  # the whole process group was ended
    assert [line for line in home.transcript(run) if line.get("type") == "result"] == []  # cut, not finished
    task = home.task(task_id)
    assert task["status"] == "failed"  # a person decides whether it is worth more
    (alert,) = recorded(events, "task_failed")
    assert (alert["task_id"], alert["outcome"]) == (task_id, "over_budget")


def test_a_timed_out_run_keeps_the_tokens_and_cost_its_stream_carried(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, dispatch={"timeout": "20s"})
        task_id = home.add_task("Think for a long time")
        usage = Usage(input=5000, output=10, cache_read=300, cache_write=40)
        api.script.set([replace(vigil_tool("note", text="thinking"), usage=usage), Slow(120, Text("too late"))])
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "timeout"
    # the first answer's usage, as its message began (its output still growing then)
    assert (run["tokens_in"], run["cache_read_tokens"], run["cache_write_tokens"]) == (5000, 300, 40)
    assert run["cost_usd"] > 0
    assert home.task(task_id)["tokens_in"] == 5000


def test_a_400_is_a_failure_labelled_with_its_status(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Anything")
        api.script.set([bad_request()] * 3)
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "failed"
    assert run["error"].startswith("HTTP 400: API Error: 400")
    assert "text content blocks must be non-empty" in run["error"]
    assert home.task(task_id)["status"] == "failed"


def test_each_attempt_keeps_what_its_agent_said_and_a_retry_continues_the_numbering(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Ship it when the release is out")
        api.script.set(
            [
                vigil_tool("close", status="pending", summary="the release is not out yet", retry_in="1s"),
                Text("I will look again."),
                vigil_tool("close", status="failed", summary="it never came out"),
                Text("Giving up."),
                Text("Shipped."),
            ]
        )
        first = home.vigil("dispatch", "once")
        home.wait_for(lambda: home.vigil("dispatch", "once").returncode == 0, timeout_s=60)  # once it is due
        retried = home.vigil("task", "retry", str(task_id))
        third = home.vigil("dispatch", "once")
        last = prompt_of(api.conversation()[-1])  # every request of the third run starts with its prompt
    assert (first.returncode, retried.returncode, third.returncode) == (0, 0, 0), third.stderr
    runs = home.runs(task_id)
    assert [(r["attempt"], r["agent_status"], r["summary"]) for r in runs] == [
        (1, "pending", "the release is not out yet"),
        (2, "failed", "it never came out"),
        (3, None, "Shipped."),
    ]
    assert "- attempt: 3 (at most 3 more after this one)" in last  # vigil task retry reset the count, not the number
    assert "- attempt 1, started" in last
    assert "the agent asked to be tried again later: the release is not out yet" in last
    assert "the agent closed it as failed: it never came out" in last
    assert "success" not in last.split("# Earlier attempts")[1].split("# How to report back")[0]
    log = (home.path / "logs" / "vigil.log").read_text()
    assert f"task #{task_id} started (attempt 3)" in log
    shown = json.loads(home.vigil("task", "show", str(task_id), "--json").stdout)
    assert [r["agent_status"] for r in shown["runs"]] == ["pending", "failed", None]
