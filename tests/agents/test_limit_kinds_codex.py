"""Limits known by kind with the real Codex through the real `vigil`, against the
local model server: what the API's ``x-codex-primary-*`` / ``x-codex-secondary-*``
headers say of the five-hour and weekly windows reaches ``vigil status`` through
Codex's session file, and a weekly limit is shown as one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.agents.clis import needs_codex
from tests.agents.codex_home import CodexHome
from tests.agents.model_server import HttpError, Text
from tests.agents.openai_api import openai_server
from tests.agents.outages import epoch_ms
from vigil.accounts import when_text

pytestmark = [needs_codex, pytest.mark.slow]

HOUR_S = 3600


def _windows(five_used: float, five_reset: int, week_used: float, week_reset: int) -> tuple[tuple[str, str], ...]:
    return (
        ("x-codex-primary-used-percent", str(five_used)),
        ("x-codex-primary-window-minutes", "300"),
        ("x-codex-primary-reset-at", str(five_reset)),
        ("x-codex-secondary-used-percent", str(week_used)),
        ("x-codex-secondary-window-minutes", "10080"),
        ("x-codex-secondary-reset-at", str(week_reset)),
    )


def _when(reset_s: int) -> str:
    return when_text(reset_s * 1000, int(time.time() * 1000))


@pytest.mark.timeout(300)  # safety nets of its waits, longer than pytest's 120 s
def test_codex_windows_are_shown_and_a_weekly_limit_is_one(tmp_path: Path) -> None:
    now = int(time.time())
    five, week = now + 2 * HOUR_S, now + 3 * 24 * HOUR_S
    weekly_limit = HttpError(
        429,
        {
            "error": {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": "plus",
                "resets_at": week,
                "resets_in_seconds": week - now,
            }
        },
        _windows(30, five, 100, week),
    )
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url, dispatch={"min_gate": "1s"})
        api.script.set([Text("Done.", headers=_windows(40, five, 80, week)), weekly_limit])
        home.add_task("One", "--priority", "4")
        second = home.add_task("Two", "--priority", "5")
        assert home.vigil("dispatch", "once").returncode == 0
        free_text = home.vigil("status").stdout
        assert home.vigil("dispatch", "once").returncode == 0
        (limited,) = home.status()["accounts"]
        limited_text = home.vigil("status").stdout
    assert f"codex:default free · 5h 40% used, resets {_when(five)} · weekly 80% used, resets {_when(week)}" in (
        free_text
    )
    assert home.runs(second)[0]["outcome"] == "usage_limited"
    assert (limited["state"], limited["kind"], limited["kind_label"]) == ("limited", "seven_day", "weekly")
    assert [w["used_percent"] for w in limited["windows"]] == [30.0, 100.0]
    assert epoch_ms(limited["until"]) >= week * 1000  # Codex names the minute: its end
    until = epoch_ms(limited["until"])
    assert f"codex:default limited (weekly) until {when_text(until, int(time.time() * 1000))}" in limited_text


def _workspace_limit(reached_type: str, week_reset: int) -> HttpError:
    """429 as the ChatGPT back end sends it when a workspace's credits or spend cap
    stop an account: ``usage_limit_reached`` with ``x-codex-rate-limit-reached-type``
    (Codex 0.171.0 names the state in its message and its session file)."""
    now = int(time.time())
    body = {
        "error": {"type": "usage_limit_reached", "message": "The usage limit has been reached", "plan_type": "team"}
    }
    headers = (*_windows(10, now + 2 * HOUR_S, 20, week_reset), ("x-codex-rate-limit-reached-type", reached_type))
    return HttpError(429, body, headers)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("reached_type", "said", "fix"),
    [
        (
            "workspace_member_usage_limit_reached",
            "You hit your spend cap set by the owner of your workspace",
            "the spend cap its ChatGPT workspace's owner set for it is reached",
        ),
        (
            "workspace_owner_credits_depleted",
            "Your workspace is out of credits. Add credits to continue.",
            "its ChatGPT workspace is out of credits",
        ),
    ],
)
def test_a_workspace_spend_cap_or_credits_wait_for_a_person_then_work_goes_on(
    tmp_path: Path, reached_type: str, said: str, fix: str
) -> None:
    week = int(time.time()) + 3 * 24 * HOUR_S
    with openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url, dispatch={"min_gate": "1s"})
        api.script.set([_workspace_limit(reached_type, week), Text("Done after the raise.")])
        task_id = home.add_task("Anything")
        assert home.vigil("dispatch", "once").returncode == 0
        (account,) = home.status()["accounts"]
        text = home.vigil("status").stdout
        gate = home.gate()
        resumed = home.vigil("resume")
        (after,) = home.status()["accounts"]
        assert home.vigil("dispatch", "once").returncode == 0
    (run, done) = home.runs(task_id)
    assert said in run["error"]
    assert run["outcome"] == "usage_limited"  # not a failure of the work: no attempt counted against it
    assert (account["state"], account["until"]) == ("needs_person", None)
    assert fix in account["fix"]
    assert f"codex:default needs you: {fix}" in text
    assert (gate["state"], gate["until"], gate["kind"]) == ("gated", None, "account")
    assert "account usable again: codex:default" in resumed.stdout
    assert after["state"] == "free"
    assert (done["outcome"], home.task(task_id)["status"]) == ("success", "completed")
