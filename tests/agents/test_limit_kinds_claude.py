"""Limits known by kind, with the real Claude Code through the real `vigil`, against
the local model server: a five-hour window's use and then its limit, a weekly
limit, usage credits used up (a reset named) and a monthly spend limit (none
named), usage turned off by the organisation (``org_level_disabled``: information
on an allowed session, a person's job on a rejected one), an account's
reserve, and one model's weekly limit (``seven_day_opus``: only that model's tasks
wait). ``vigil status`` says per account what is left and when it resets.

Each account is a subscription login (``subscription_login``): only then does
Claude Code print ``rate_limit_event`` lines (``tests.agents.rate_limits``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.agents.anthropic_api import anthropic_server
from tests.agents.clis import needs_claude
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Text
from tests.agents.outages import epoch_ms, subscription_login
from tests.agents.rate_limits import allowed_without_credits, rejected, used
from vigil.accounts import when_text

pytestmark = [needs_claude, pytest.mark.slow]

HOUR_S = 3600


def _home(tmp_path: Path, url: str, *accounts: tuple[str, float | None]) -> ClaudeHome:
    """A home whose accounts (name, reserve) are each logged in with token ``tok-NAME``."""
    toml = ""
    for name, reserve in accounts:
        folder = subscription_login(tmp_path / f"claude-{name}", f"tok-{name}")
        toml += f'\n[[executors.claude.accounts]]\nname = "{name}"\nconfig_dir = "{folder}"\n'
        toml += "" if reserve is None else f"reserve = {reserve}\n"
    return ClaudeHome.make(tmp_path, url, dispatch={"min_gate": "1s"}, toml=toml)


def _once(home: ClaudeHome) -> None:
    proc = home.vigil("dispatch", "once")
    assert proc.returncode == 0, proc.stderr


def _shown(home: ClaudeHome) -> tuple[dict[str, dict[str, Any]], str]:
    """``vigil status --json``'s accounts by name, and ``vigil status``'s text."""
    text = home.vigil("status")
    assert text.returncode == 0, text.stderr
    return {a["account"]: a for a in home.status()["accounts"]}, text.stdout


def _when(reset_s: int) -> str:
    return when_text(reset_s * 1000, int(time.time() * 1000))


@pytest.mark.timeout(300)  # safety nets of its waits, longer than pytest's 120 s
def test_a_five_hour_windows_use_and_then_its_limit_are_shown(tmp_path: Path) -> None:
    reset = int(time.time()) + 3 * HOUR_S
    with anthropic_server() as api:
        home = _home(tmp_path, api.server.url, ("main", None))
        api.script_for("tok-main").set([used("five_hour", 0.62, reset), rejected("five_hour", reset)])
        home.add_task("One", "--priority", "4")
        second = home.add_task("Two", "--priority", "5")
        _once(home)
        free, free_text = _shown(home)
        _once(home)
        limited, limited_text = _shown(home)
    (window,) = free["main"]["windows"]
    assert (free["main"]["state"], window["kind"], window["used_percent"]) == ("free", "five_hour", 62.0)
    assert epoch_ms(window["resets_at"]) == reset * 1000
    assert f"claude:main free · 5h 62% used, resets {_when(reset)}" in free_text
    account = limited["main"]
    assert (account["state"], account["kind"], account["kind_label"]) == ("limited", "five_hour", "5h")
    assert epoch_ms(account["until"]) == reset * 1000
    assert f"claude:main limited (5h) until {_when(reset)}" in limited_text
    assert [run["outcome"] for run in home.runs(second)] == ["usage_limited"]
    assert home.task(second)["attempt_count"] == 0  # a limit is not the task's failure


@pytest.mark.timeout(300)
def test_a_weekly_limit_waits_for_its_reset_days_away(tmp_path: Path) -> None:
    reset = int(time.time()) + 3 * 24 * HOUR_S
    with anthropic_server() as api:
        home = _home(tmp_path, api.server.url, ("main", None))
        api.script_for("tok-main").set([rejected("seven_day", reset)])
        task_id = home.add_task("Anything")
        _once(home)
        shown, text = _shown(home)
        gate = home.gate()
    account = shown["main"]
    assert (account["state"], account["kind"], account["kind_label"]) == ("limited", "seven_day", "weekly")
    assert epoch_ms(account["until"]) == reset * 1000
    assert f"claude:main limited (weekly) until {_when(reset)}" in text
    assert "You've hit your weekly limit" in home.runs(task_id)[0]["error"]  # what Claude Code said
    # its only account: the loop waits for the reset, by itself
    assert (gate["state"], gate["kind"], epoch_ms(gate["until"])) == ("gated", "usage", reset * 1000)


@pytest.mark.timeout(300)
def test_usage_credits_used_up_wait_for_their_reset(tmp_path: Path) -> None:
    reset = int(time.time()) + 2 * HOUR_S
    with anthropic_server() as api:
        home = _home(tmp_path, api.server.url, ("main", None))
        api.script_for("tok-main").set(
            [rejected("overage", reset, overage_reason="out_of_credits", overage_reset_s=reset)]
        )
        home.add_task("Anything")
        _once(home)
        shown, text = _shown(home)
    account = shown["main"]
    assert (account["state"], account["kind_label"], account["fix"]) == ("limited", "usage credits", None)
    assert epoch_ms(account["until"]) == reset * 1000
    assert f"claude:main limited (usage credits) until {_when(reset)}" in text


@pytest.mark.timeout(300)
def test_a_monthly_spend_limit_with_no_reset_waits_for_a_person_then_work_goes_on(tmp_path: Path) -> None:
    with anthropic_server() as api:
        home = _home(tmp_path, api.server.url, ("main", None))
        # Claude Code 2.1.197 names org_spend_cap_reached org_level_disabled_until
        limit = rejected("five_hour", None, overage_reason="org_spend_cap_reached")
        api.script_for("tok-main").set([limit, Text("Done after the raise.")])
        task_id = home.add_task("Anything")
        _once(home)
        shown, text = _shown(home)
        gate = home.gate()
        resumed = home.vigil("resume")
        after, _ = _shown(home)
        _once(home)
    (run, done) = home.runs(task_id)
    assert "You've hit your monthly spend limit" in run["error"]  # prose, no reset
    assert run["outcome"] == "usage_limited"
    account = shown["main"]
    assert (account["state"], account["until"]) == ("needs_person", None)
    assert "its monthly spend limit is reached: raise it at claude.ai/settings/usage" in account["fix"]
    assert "claude:main needs you: its monthly spend limit is reached" in text
    # a gate only a person lifts, saying what to do; never a limit retried
    assert (gate["state"], gate["until"], gate["kind"]) == ("gated", None, "account")
    assert gate["reason"].endswith("then run vigil resume")
    assert "account usable again: claude:main" in resumed.stdout
    assert after["main"]["state"] == "free"
    assert (done["outcome"], home.task(task_id)["status"]) == ("success", "completed")


@pytest.mark.timeout(300)
def test_org_level_disabled_is_information_on_an_allowed_session_and_a_persons_job_on_a_rejected_one(
    tmp_path: Path,
) -> None:
    with anthropic_server() as api:
        home = _home(tmp_path, api.server.url, ("main", None))
        org_off = rejected(None, None, overage_reason="org_level_disabled")
        api.script_for("tok-main").set([allowed_without_credits(int(time.time()) + HOUR_S), org_off])
        first = home.add_task("One", "--priority", "4")
        second = home.add_task("Two", "--priority", "5")
        _once(home)
        allowed, _ = _shown(home)
        open_gate = home.gate()
        _once(home)
        shown, text = _shown(home)
        gate = home.gate()
    # smithers#1342: credits turned off on an account that still has its plan's usage
    assert (home.task(first)["status"], allowed["main"]["state"], open_gate["state"]) == (
        "completed",
        "free",
        "running",
    )
    assert home.runs(second)[0]["outcome"] == "usage_limited"
    assert shown["main"]["state"] == "needs_person"
    assert "claude:main needs you: its organisation turned its usage off (org_level_disabled)" in text
    assert (gate["until"], gate["kind"]) == (None, "account")


@pytest.mark.timeout(300)
def test_an_accounts_reserve_stops_unattended_work_on_it_until_its_window_resets(tmp_path: Path) -> None:
    reset = int(time.time()) + 2 * HOUR_S
    with anthropic_server() as api:
        home = _home(tmp_path, api.server.url, ("a", 0.2), ("b", None))
        # a's five-hour window is 85% used: less than its 20% reserve is left
        api.script_for("tok-a").set([used("five_hour", 0.85, reset)])
        first = home.add_task("One", "--priority", "4")
        second = home.add_task("Two", "--priority", "5")
        _once(home)
        _once(home)
        shown, text = _shown(home)
    assert [run["account"] for run in home.runs(first)] == ["a"]
    assert [run["account"] for run in home.runs(second)] == ["b"]  # a keeps its reserve
    account = shown["a"]
    assert (account["state"], account["reserve"], epoch_ms(account["until"])) == ("reserved", 0.2, reset * 1000)
    assert "reserve: 5h window 85% used, 20% kept for you" in account["reason"]
    assert f"claude:a reserved until {_when(reset)}" in text
    assert shown["b"]["state"] == "free"


@pytest.mark.timeout(300)
def test_a_weekly_opus_limit_stops_only_opus_tasks(tmp_path: Path) -> None:
    """``seven_day_opus`` rejected: the account stays usable for a Sonnet task; an
    Opus task waits for the reset; the loop is never gated for it."""
    reset = int(time.time()) + 50 * HOUR_S
    with anthropic_server() as api:
        home = _home(tmp_path, api.server.url, ("main", None))
        api.script_for("tok-main").set([rejected("seven_day_opus", reset), Text("Done on Sonnet.")])
        opus = home.add_task("On Opus", "--model", "claude-opus-4-6", "--priority", "5")
        _once(home)
        limited, text = _shown(home)
        sonnet = home.add_task("On Sonnet", "--model", "claude-sonnet-4-5", "--priority", "1")
        _once(home)
        gate = home.gate()
    assert home.runs(opus)[0]["outcome"] == "usage_limited"
    account = limited["main"]
    assert (account["state"], account["kind"], account["model_family"]) == ("limited", "seven_day_opus", "opus")
    assert epoch_ms(account["until"]) == reset * 1000
    assert f"claude:main limited for Opus tasks (weekly Opus) until {_when(reset)}" in text
    assert gate["state"] != "gated"
    (run,) = home.runs(sonnet)
    assert run["outcome"] == "success"  # the same account, on another model
    assert home.task(sonnet)["status"] == "completed"
    assert home.task(opus)["status"] == "pending"
