"""Every cap metered or refused, and agent-made tasks that cannot jump the queue,
with the real Claude Code through the real `vigil` against the local model server
(issue 37, items 1 and 2): a model missing from the price table under a cap, an
overrun that shows only in the run's final figures, a follow-up at priority 1 over
the daily budget, and `vigil doctor` naming the model it cannot price."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.agents.anthropic_api import anthropic_server, vigil_tool
from tests.agents.clis import needs_claude
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Slow, Text, Usage

pytestmark = [needs_claude, pytest.mark.slow]

UNPRICED = "claude-sonnet-5"  # newer than Vigil's price table: priced by its family, sonnet
BIG_INPUT = Usage(input=200_000, output=10, cache_read=0, cache_write=0)  # $0.60 at sonnet's $3/M input


def tool_results(conversation: list[dict[str, Any]]) -> list[str]:
    """The text of every tool result the CLI sent back to the model, in order."""
    found = []
    for message in conversation[-1]["messages"] if conversation else ():
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                found.append(json.dumps(block.get("content")))
    return found


def test_an_unpriced_model_under_a_cap_is_metered_at_its_familys_price_and_stopped(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Spend a little", "--max-cost", "0.05", "--model", UNPRICED)
        api.script.set(
            [
                replace(vigil_tool("note", text="read everything"), usage=BIG_INPUT),
                Slow(60, Text("too late: the run is over")),
            ]
        )
        proc = home.vigil("dispatch", "once")
        assert proc.returncode == 0, proc.stderr
        (run,) = home.runs(task_id)
        assert run["outcome"] == "over_budget", run["error"]
        assert "past the task's max_cost_usd of $0.05" in run["error"]
        assert run["tokens_in"] == 200_000
        assert run["cost_usd"] == pytest.approx(0.6, abs=0.01)  # not $0: the family's price metered it
        assert run["priced_by"] == f"tokens: {UNPRICED} at the claude-sonnet family's price"
        assert home.task(task_id)["status"] == "failed"
        # the model it could not price by name is one doctor names
        doctor = home.vigil("doctor").stdout
    prices = [line for line in doctor.splitlines() if line.split()[1:2] == ["prices"]]
    assert any(
        line.startswith("warn") and f"'{UNPRICED}' (seen in recent runs) has no price of its own" in line
        for line in prices
    ), prices
    assert any("claude-sonnet family's price" in line for line in prices), prices


def test_an_overrun_that_shows_only_in_the_final_result_is_recorded_over_budget(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Write a long answer", "--max-cost", "0.5")
        # each message's usage as it begins shows 1 output token: the 200,000 show in the result only
        api.script.set([Text("Done: a very long answer.", usage=Usage(input=100, output=200_000))])
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "over_budget", run["error"]
    assert run["error"].startswith("over budget: the run spent $")
    assert "past the task's max_cost_usd of $0.50 (the overrun showed when the run ended)" in run["error"]
    assert run["cost_usd"] > 0.5  # Claude Code's own total_cost_usd
    assert run["priced_by"].startswith("Claude Code's total_cost_usd; tokens: ")
    assert run["tokens_out"] == 200_000
    assert home.task(task_id)["status"] == "failed"


def test_an_agents_follow_up_over_the_budget_waits_like_the_persons_tasks(tmp_path: Path) -> None:
    """Over the daily budget only tasks a person made urgent run. The agent of a
    person's urgent task (priority 2 here, ``urgent_priority = 2``) asks for a
    follow-up at priority 1: it gets its parent's 2, and says so; over the budget
    neither it nor the person's priority-5 task runs, and the person's next urgent
    task does."""
    toml = "\n[budget]\ndaily_usd = 0.5\nurgent_priority = 2\n"
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, toml=toml)
        urgent = home.add_task("Urgent: fix production", "--priority", "2")
        routine = home.add_task("Routine: tidy the docs")  # priority 5, by the person
        huge = Usage(input=1_000_000, output=10, cache_read=0, cache_write=0)  # past $0.5 at any Claude price
        api.script.set(
            [
                replace(vigil_tool("add_followup", subject="Follow up at once", priority=1), usage=huge),
                Text("Done."),
            ]
        )
        proc = home.vigil("dispatch", "once")
        assert proc.returncode == 0, proc.stderr
        said = tool_results(api.conversation())
        (follow_up,) = home.rows("SELECT * FROM tasks WHERE parent_id = ?", urgent)
        # over the budget now: the follow-up (an agent's, however urgent) and the person's routine task wait
        idle = home.vigil("dispatch", "once")
        assert idle.returncode == 3, idle.stderr
        assert idle.stdout.endswith("in 24 h): only tasks a person made urgent\n"), idle.stdout
        assert home.runs(follow_up["id"]) == []
        assert home.runs(routine) == []
        again = home.add_task("Urgent: roll back", "--priority", "2")
        api.script.set([Text("Rolled back.")])
        assert home.vigil("dispatch", "once").returncode == 0
    assert home.task(urgent)["status"] == "completed"
    assert home.task(urgent)["cost_usd"] > 0.5
    assert follow_up["priority"] == 2
    assert any(
        "priority 2, not 1" in text and f"its parent, task #{urgent}, has priority 2" in text for text in said
    ), said
    assert "over the cap" in home.vigil("status").stdout
    assert (home.task(follow_up["id"])["status"], home.task(routine)["status"]) == ("pending", "pending")
    assert home.task(again)["status"] == "completed"


def test_a_model_of_no_known_family_named_for_a_capped_run_is_held_by_claude_codes_own_total(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Spend a little", "--max-cost", "0.05", "--model", "house-model-1")
        api.script.set(
            [
                replace(vigil_tool("note", text="read everything"), usage=BIG_INPUT),
                Text("Done, past the cap."),
            ]
        )
        proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "over_budget", run["error"]
    assert run["error"].startswith("over budget: Claude Code stopped the run at $")
    assert "by Claude Code's total_cost_usd, past the task's max_cost_usd of $0.05" in run["error"]
    assert run["cost_usd"] > 0.05
    assert run["priced_by"] == "Claude Code's total_cost_usd; tokens: house-model-1 unpriced"


def test_a_capped_run_whose_cli_picks_a_model_of_no_price_is_refused_at_its_start(tmp_path: Path) -> None:
    """Claude Code names its model in its ``init`` line, as it sends its first
    request: the run is ended there, before any answer is spent on."""
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Spend a little", "--max-cost", "0.05")
        proc = home.vigil("dispatch", "once", ANTHROPIC_MODEL="house-model-1")  # the CLI's choice, not Vigil's
        asked = api.conversation()
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "failed"
    assert run["error"].startswith("refused: the task's max_cost_usd of $0.05 cannot be metered: ")
    assert "Claude Code chose model 'house-model-1', which has no price" in run["error"]
    assert len(asked) <= 1
    assert run["tokens_in"] == 0
    assert home.task(task_id)["status"] == "failed"
