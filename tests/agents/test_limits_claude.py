"""Usage and rate limits with the real Claude Code through the real `vigil`, against
the local model server: a reset already past, an API key's 429 that names its
wait, two subscription accounts, every account limited, and fallback to Codex.

Claude Code retries a failed API call once here (``CLAUDE_CODE_MAX_RETRIES=1``).
A subscription's limit is a 429 with the limit's headers sent to a login
(``rate_limited`` to a token from ``subscription_login``): Claude Code prints a
``rate_limit_event`` ``rejected`` with ``resetsAt``. An API key's 429 prints no
reset: the last ``api_retry`` waited the response's ``retry-after``.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from tests.agents.anthropic_api import anthropic_server
from tests.agents.clis import codex_path, needs_claude, needs_codex
from tests.agents.codex_home import TEST_KEY
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Text, rate_limited
from tests.agents.openai_api import codex_config, openai_server
from tests.agents.outages import alerts_toml, epoch_ms, recorded, subscription_login

pytestmark = [needs_claude, pytest.mark.slow]

MIN_GATE = "1s"  # the gates' floor here: short, so that a test waits seconds, not half a minute


def accounts_toml(tmp_path: Path, *tokens: str) -> str:
    """``[[executors.claude.accounts]]`` a, b …, each a folder logged in with its token."""
    text = ""
    for name, token in zip("abcdefgh", tokens, strict=False):
        folder = subscription_login(tmp_path / f"claude-{name}", token)
        text += f'\n[[executors.claude.accounts]]\nname = "{name}"\nconfig_dir = "{folder}"\n'
    return text


@pytest.mark.timeout(300)  # safety nets of its waits, longer than pytest's 120 s
def test_a_reset_already_past_makes_no_hot_loop_and_a_short_hold_alerts_nothing(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, dispatch={"min_gate": "3s"}, toml=alerts_toml(events))
        task_id = home.add_task("Anything")
        # the limit's reset header is 20 s stale, three times over; then the model answers
        api.script.set([rate_limited(reset_epoch_s=int(time.time()) - 20)] * 3 + [Text("Done at last.")])
        env = home.env(CLAUDE_CODE_OAUTH_TOKEN="sk-ant-oat01-test-token")
        del env["ANTHROPIC_API_KEY"]
        loop = home.start_with_env("run", env=env)
        try:
            home.wait_for(lambda: home.task(task_id)["status"] == "completed", timeout_s=120)
        finally:
            home.stop(loop)
    runs = home.runs(task_id)
    assert [run["outcome"] for run in runs] == ["usage_limited"] * 3 + ["success"]
    # each attempt waited the gate's floor after the one before: no hot loop
    for before, after in itertools.pairwise(runs):
        assert after["started_at"] - before["finished_at"] >= 3000
    assert home.task(task_id)["attempt_count"] == 1  # the limited attempts were given back
    # held seconds, not [alerts] held_loop's 30 minutes: nothing a person needs to hear
    assert recorded(events, "gate_changed") == []


@pytest.mark.timeout(300)  # safety nets of its waits, longer than pytest's 120 s
def test_an_api_keys_429_waits_what_its_retry_after_asked_not_an_hour(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url, dispatch={"min_gate": MIN_GATE})
        task_id = home.add_task("Anything")
        reset_s = int(time.time()) + 120  # the headers name a reset 2 minutes away, and retry-after: 1
        api.script.set([rate_limited(reset_epoch_s=reset_s, retry_after_s=1)] * 2 + [Text("Done.")])
        once = home.vigil("dispatch", "once")
        # the limit as recorded: `vigil status` would say "free" once the short
        # wait is over, which a loaded machine may reach before it answers
        (stored,) = home.rows("SELECT value FROM loop_state WHERE key = 'accounts'")
        loop = home.start("run")
        try:
            home.wait_for(lambda: home.task(task_id)["status"] == "completed", timeout_s=90)
        finally:
            home.stop(loop)
    assert once.returncode == 0, once.stderr
    first, second = home.runs(task_id)
    assert (first["outcome"], second["outcome"]) == ("usage_limited", "success")
    assert "Request rejected (429)" in first["error"]
    # what Claude Code printed: its retry waited the response's retry-after
    (retry,) = [line for line in home.transcript(first) if line.get("subtype") == "api_retry"]
    assert (retry["error_status"], retry["retry_delay_ms"]) == (429, 1000)
    (limited,) = json.loads(stored["value"]).items()
    assert limited[0] == "claude:default"
    # the account waited what retry-after asked (at least the floor), not the hour-long fallback
    assert 0 < limited[1]["until"] - first["finished_at"] < 60_000
    assert second["started_at"] - first["finished_at"] >= 1000


@pytest.mark.timeout(300)  # safety nets of its waits, longer than pytest's 120 s
def test_a_second_account_takes_over_at_once_and_the_first_is_used_again_after_its_reset(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    with anthropic_server() as api:
        toml = accounts_toml(tmp_path, "tok-a", "tok-b") + alerts_toml(events)
        home = ClaudeHome.make(tmp_path, api.server.url, dispatch={"min_gate": MIN_GATE}, toml=toml)
        # priorities keep the order fixed: a task given back comes first again
        first, second, third = (home.add_task(f"Task {n}", "--priority", str(n + 3)) for n in (1, 2, 3))
        reset_a = int(time.time()) + 30  # account a meets its five-hour limit, resetting in 30 s
        api.script_for("tok-a").set([rate_limited(reset_epoch_s=reset_a)])
        # b does two tasks, then meets its own limit (far away)
        api.script_for("tok-b").set([Text("one"), Text("two"), rate_limited(reset_epoch_s=reset_a + 3600)])
        loop = home.start("run")
        try:
            home.wait_for(lambda: home.task(third)["status"] == "completed", timeout_s=150)
            status = home.status()
            by_account = home.vigil("stats", "--by", "account", "--json")
        finally:
            home.stop(loop)
    on = {task: [(run["outcome"], run["account"]) for run in home.runs(task)] for task in (first, second, third)}
    # a's limit sent the first task to b at once; it was neither failed nor counted
    assert on[first] == [("usage_limited", "a"), ("success", "b")]
    assert home.task(first)["attempt_count"] == 1
    assert on[second] == [("success", "b")]
    # b met its limit too: the third task ran on a once a's reset had come
    assert on[third] == [("usage_limited", "b"), ("success", "a")]
    assert home.runs(third)[1]["started_at"] >= reset_a * 1000
    shown = {(a["account"], a["state"]) for a in status["accounts"]}
    assert shown == {("a", "free"), ("b", "limited")}
    rows = {row["key"]: row["runs"] for row in json.loads(by_account.stdout)["rows"]}
    assert rows == {"claude:a": 2, "claude:b": 3}


@pytest.mark.timeout(300)  # safety nets of its waits, longer than pytest's 120 s
def test_with_every_account_limited_the_loop_waits_for_the_earliest_reset(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    with anthropic_server() as api:
        # a hold longer than held_loop is told once, and once more when it is over
        toml = accounts_toml(tmp_path, "tok-a", "tok-b") + alerts_toml(events, held_loop="5s")
        home = ClaudeHome.make(tmp_path, api.server.url, dispatch={"min_gate": MIN_GATE}, toml=toml)
        task_id = home.add_task("Anything")
        now = int(time.time())
        api.script_for("tok-a").set([rate_limited(reset_epoch_s=now + 30)])
        api.script_for("tok-b").set([rate_limited(reset_epoch_s=now + 3600)])
        loop = home.start("run")
        try:
            home.wait_for(lambda: len(home.runs(task_id)) == 2 and home.gate()["state"] == "gated", timeout_s=60)
            gate = home.gate()
            home.wait_for(lambda: home.task(task_id)["status"] == "completed", timeout_s=90)
        finally:
            home.stop(loop)
    assert "every account is limited" in gate["reason"]
    assert epoch_ms(gate["until"]) == (now + 30) * 1000  # the earliest reset, a's
    runs = home.runs(task_id)
    assert [(run["outcome"], run["account"]) for run in runs] == [
        ("usage_limited", "a"),
        ("usage_limited", "b"),
        ("success", "a"),
    ]
    assert runs[2]["started_at"] >= (now + 30) * 1000
    gated = recorded(events, "gate_changed")
    assert [(e["state"], e.get("until")) for e in gated] == [("gated", (now + 30) * 1000), ("running", None)]
    assert gated[0]["ends_by_itself"] is True
    assert gated[0]["message"].startswith("the loop has been held for ")
    assert all("vigil resume" not in e["message"] for e in gated)


@needs_codex
@pytest.mark.timeout(300)  # safety nets of its waits, longer than pytest's 120 s
def test_with_claude_limited_a_task_falls_back_to_codex_unless_its_skill_forbids_it(tmp_path: Path) -> None:
    reset_s = int(time.time()) + 3600
    with anthropic_server() as claude_api, openai_server() as codex_api:
        skill = f'\n[executors.codex]\ncommand = ["{codex_path()}"]\n'
        home = ClaudeHome.make(
            tmp_path, claude_api.server.url, dispatch={"fallback": ["codex"], "min_gate": MIN_GATE}, toml=skill
        )
        folder = home.path / "skills" / "claude-only"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text("---\ndescription: Needs Claude.\nfallback: false\n---\nDo it.\n")
        codex_home = tmp_path / "codex-home"
        codex_config(codex_home, codex_api.server.url)
        (tmp_path / "operator-tmp").mkdir()
        operator = {"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": TEST_KEY, "TMPDIR": str(tmp_path / "operator-tmp")}
        anywhere = home.add_task("Anything")
        own = home.add_task("Only on Claude", "--skills", "claude-only", "--priority", "6")
        claude_api.script.set([rate_limited(reset_epoch_s=reset_s)])
        codex_api.script.set([Text("Done on Codex.")])
        env = home.env(CLAUDE_CODE_OAUTH_TOKEN="sk-ant-oat01-test-token", **operator)
        del env["ANTHROPIC_API_KEY"]
        loop = home.start_with_env("run", env=env)
        try:
            home.wait_for(lambda: home.task(anywhere)["status"] == "completed", timeout_s=90)
            home.wait_for(lambda: home.task(own)["scheduled_for"] >= reset_s * 1000, timeout_s=60)
            gate = home.gate()
        finally:
            home.stop(loop)
    runs = home.runs(anywhere)
    assert [(run["outcome"], run["executor"], run["account"]) for run in runs] == [
        ("usage_limited", "claude", "default"),
        ("success", "codex", "default"),
    ]
    assert home.task(anywhere)["executor"] == "codex"
    assert gate["state"] == "running"  # Codex was free: the loop never waited
    # the skill forbids fallback: its task waits unrun for Claude's reset
    assert (home.task(own)["status"], home.runs(own)) == ("pending", [])


@pytest.mark.timeout(300)  # safety nets of its waits, longer than pytest's 120 s
def test_a_fallback_that_cannot_start_during_a_limit_is_skipped_and_the_reset_resumes_work(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    with anthropic_server() as api:
        missing = f'\n[executors.codex]\ncommand = ["{tmp_path / "no-codex"}"]\n'
        dispatch = {"fallback": ["codex"], "min_gate": MIN_GATE}
        home = ClaudeHome.make(tmp_path, api.server.url, dispatch=dispatch, toml=missing + alerts_toml(events))
        first = home.add_task("First", "--priority", "4")
        second = home.add_task("Second", "--priority", "5")
        reset_s = int(time.time()) + 30  # Claude's account frees itself in 30 s
        api.script.set([rate_limited(reset_epoch_s=reset_s), Text("one"), Text("two")])
        env = home.env(CLAUDE_CODE_OAUTH_TOKEN="sk-ant-oat01-test-token")
        del env["ANTHROPIC_API_KEY"]
        loop = home.start_with_env("run", env=env)
        try:
            home.wait_for(lambda: home.task(second)["status"] == "completed", timeout_s=150)
            gate = home.gate()
            status = home.status()
        finally:
            home.stop(loop)
    runs = home.runs(first)
    assert [(run["outcome"], run["executor"]) for run in runs] == [
        ("usage_limited", "claude"),
        ("refused", "codex"),  # the fallback that cannot start: tried once, then skipped
        ("success", "claude"),  # after the reset, by itself
    ]
    assert runs[2]["started_at"] >= reset_s * 1000
    assert [(run["outcome"], run["executor"]) for run in home.runs(second)] == [("success", "claude")]
    assert (home.task(first)["attempt_count"], gate["state"]) == (1, "running")
    (skipped,) = recorded(events, "fallback_skipped")  # one alert, saying what to do
    assert skipped["account"] == "codex:default"
    assert "no-codex" in skipped["message"]
    assert "take it out of [dispatch] fallback" in skipped["fix"]
    assert recorded(events, "gate_changed") == []  # no person's gate, and a hold of seconds is not told
    codex = next(a for a in status["accounts"] if a["executor"] == "codex")
    assert (codex["state"], codex["reason"].startswith("skipped, cannot start: refused")) == ("limited", True)
