"""Limits known by kind, on the injected clock: what each ``rate_limit_event`` and
Codex's session file say is recorded per account; a state only a person ends
(a spend limit with no reset, usage turned off by the organisation, the same in
prose) holds the account until ``vigil resume`` instead of being waited out; an
account's ``reserve`` stops unattended work on it until its window resets; status
says per account what is left."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.accounts import pick
from dispatch.agents.claude.stream import ClaudeStream, classify
from dispatch.agents.codex.rollout import rollout_limits
from dispatch.agents.codex.stream import CodexStream
from dispatch.agents.codex.stream import classify as codex_classify
from tests.guard.conftest import GuardFactory
from tests.guard.support import a_task, guard_settings, recorded
from vigil.accounts import (
    HELD_UNTIL,
    account_line,
    accounts_json,
    read_limits,
    read_windows,
    record_reports,
    release_holds,
    when_text,
)
from vigil.clock import ManualClock
from vigil.errors import ConfigError
from vigil.gate import GateState, read_gate
from vigil.limit_kinds import LimitReport, person_fix
from vigil.models import Outcome, OutcomeKind, Task
from vigil.store.sqlite import SqliteStore

MINUTE = 60_000
HOUR = 60 * MINUTE
TWO_ACCOUNTS = {"accounts": [{"name": "a", "config_dir": "a"}, {"name": "b", "config_dir": "b"}]}
SPEND_TEXT = "You've hit your monthly spend limit · raise it at claude.ai/settings/usage"


def _stream(*infos: dict[str, object], result: str, status: int | None = 429, is_error: bool = True) -> ClaudeStream:
    """A Claude Code stream with these ``rate_limit_info`` values and a result (an
    error unless told, with HTTP ``status``)."""
    stream = ClaudeStream()
    stream.feed(json.dumps({"type": "system", "subtype": "init", "session_id": "s", "model": "m"}).encode())
    for info in infos:
        stream.feed(json.dumps({"type": "rate_limit_event", "rate_limit_info": info}).encode())
    line = {"type": "result", "subtype": "success", "is_error": is_error, "api_error_status": status}
    stream.feed(json.dumps({**line, "result": result}).encode())
    return stream


async def _claude_task(store: SqliteStore) -> Task:
    return replace(await a_task(store, "work"), executor="claude")


def test_each_rate_limit_event_is_read_with_its_kind_window_reset_and_use() -> None:
    reset_s = 1_800_000_000
    warning = {"status": "allowed_warning", "resetsAt": reset_s, "rateLimitType": "five_hour", "utilization": 0.62}
    weekly = {"status": "rejected", "resetsAt": reset_s + 86_400, "rateLimitType": "seven_day"}
    stream = _stream(warning, weekly, result="You've hit your weekly limit · resets 9:46pm (UTC)")

    first, second = stream.limit_reports
    assert (first.kind, first.status, first.utilization, first.resets_at) == (
        "five_hour",
        "allowed_warning",
        0.62,
        reset_s * 1000,
    )
    assert (second.kind, second.rejected, second.window_ms) == ("seven_day", True, 168 * HOUR)
    verdict = classify(stream, 1, "", reset_s * 1000)
    assert (verdict.kind, verdict.retry_at) == (OutcomeKind.USAGE_LIMITED, (reset_s + 86_400) * 1000)
    assert person_fix(stream.limit_reports, verdict.error) is None  # it ends by itself


def test_an_allowed_session_with_usage_credits_turned_off_is_no_limit() -> None:
    """smithers#1342: ``overageStatus: rejected`` with ``org_level_disabled`` on an
    allowed session is the account's standing configuration, not a rejection."""
    info = {"status": "allowed", "rateLimitType": "five_hour", "overageStatus": "rejected"}
    stream = _stream(
        {**info, "overageDisabledReason": "org_level_disabled"}, result="Done.", status=None, is_error=False
    )
    assert classify(stream, 0, "", 0).kind is OutcomeKind.SUCCESS
    assert person_fix(stream.limit_reports, None) is None


@pytest.mark.parametrize(
    ("info", "text", "fix"),
    [
        (  # Claude Code 2.1.197 with org_spend_cap_reached: no reset named
            {"status": "rejected", "rateLimitType": "five_hour", "overageDisabledReason": "org_level_disabled_until"},
            SPEND_TEXT,
            "monthly spend limit is reached",
        ),
        ({"status": "rejected", "overageDisabledReason": "org_level_disabled"}, "You've hit your limit", "turned"),
        ({"status": "rejected", "overageDisabledReason": "out_of_credits"}, "You're out of usage credits", "add"),
        (None, SPEND_TEXT, "monthly spend limit is reached"),  # claude-mem#3652: the prose alone
    ],
)
def test_a_state_only_a_person_ends_is_known_with_what_to_do(
    info: dict[str, object] | None, text: str, fix: str
) -> None:
    stream = _stream(info, result=text) if info is not None else _stream(result=text, status=None)
    verdict = classify(stream, 1, "", 0)
    assert verdict.kind is OutcomeKind.USAGE_LIMITED  # never failed, never counted
    found = person_fix(stream.limit_reports, verdict.error)
    assert found is not None
    assert fix in found


def test_a_spend_limit_that_names_a_reset_is_waited_out() -> None:
    reset_s = 1_800_000_000
    info = {"status": "rejected", "resetsAt": reset_s, "rateLimitType": "overage", "overageStatus": "rejected"}
    stream = _stream({**info, "overageDisabledReason": "out_of_credits"}, result="out of usage credits · resets 9pm")
    assert person_fix(stream.limit_reports, None) is None
    stacked = "You've hit your monthly spend limit · your session limit resets 2:40pm (Asia/Jakarta)"
    assert person_fix((), stacked) is None


def test_codex_session_file_names_both_windows(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    limits = {
        "primary": {"used_percent": 100.0, "window_minutes": 300, "resets_at": 1_800_000_000},
        "secondary": {"used_percent": 20.0, "window_minutes": 10080, "resets_at": 1_800_300_000},
    }
    lines = [{"type": "event_msg", "payload": {"type": "token_count", "info": None, "rate_limits": limits}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    five, week = rollout_limits(path)
    assert (five.kind, five.rejected, five.utilization, five.resets_at) == ("five_hour", True, 1.0, 1_800_000_000_000)
    assert (week.kind, week.rejected, week.utilization) == ("seven_day", False, 0.2)


def _codex_session(tmp_path: Path, **state: object) -> Path:
    path = tmp_path / "rollout.jsonl"
    limits = {"primary": {"used_percent": 10.0, "window_minutes": 300, "resets_at": 1_800_000_000}, **state}
    line = {"type": "event_msg", "payload": {"type": "token_count", "info": None, "rate_limits": limits}}
    path.write_text(json.dumps(line) + "\n")
    return path


@pytest.mark.parametrize(
    ("state", "fix"),
    [
        ({"rate_limit_reached_type": "workspace_owner_credits_depleted"}, "workspace is out of credits: add"),
        ({"rate_limit_reached_type": "workspace_member_credits_depleted"}, "ask the workspace's owner"),
        ({"rate_limit_reached_type": "workspace_owner_usage_limit_reached"}, "raise the spend cap"),
        ({"rate_limit_reached_type": "workspace_member_usage_limit_reached"}, "ask an owner to raise it"),
        ({"rate_limit_reached_type": None, "spend_control_reached": True}, "spend control is reached"),
    ],
)
def test_codex_names_a_workspace_state_only_a_person_ends(tmp_path: Path, state: dict[str, object], fix: str) -> None:
    five, held = rollout_limits(_codex_session(tmp_path, **state))
    assert (five.kind, five.rejected) == ("five_hour", False)
    assert (held.kind, held.rejected, held.resets_at) == ("spend_control", True, None)
    found = person_fix((five, held), "You hit your spend cap set in your workspace.")
    assert found is not None
    assert fix in found


def test_codex_rate_limit_reached_is_a_window_that_resets(tmp_path: Path) -> None:
    (five,) = rollout_limits(_codex_session(tmp_path, rate_limit_reached_type="rate_limit_reached"))
    assert person_fix((five,), "You've hit your usage limit. Try again at 3:46 PM.") is None


@pytest.mark.parametrize(
    ("message", "fix"),
    [
        ("You hit your spend cap set in your workspace. Increase your spend cap to continue.", "raise the spend cap"),
        (
            "You hit your spend cap set by the owner of your workspace. Ask an owner to increase your spend cap "
            "to continue.",
            "ask an owner to raise it",
        ),
        ("Your workspace is out of credits. Add credits to continue.", "add credits"),
        ("Your workspace is out of credits. Ask your workspace owner to refill in order to continue.", "owner"),
        ("To use Codex with your ChatGPT plan, upgrade to Plus: https://chatgpt.com/explore/plus.", "upgrade"),
        ("Quota exceeded. Check your plan and billing details.", "billing"),
    ],
)
def test_codex_says_a_state_only_a_person_ends_in_prose(message: str, fix: str) -> None:
    """Codex 0.171.0's own messages for these states (no session file needed)."""
    stream = CodexStream()
    for event in ({"type": "turn.started"}, {"type": "turn.failed", "error": {"message": message}}):
        stream.feed(json.dumps(event).encode())
    verdict = codex_classify(stream, 1, "", 0)
    assert verdict.kind is OutcomeKind.USAGE_LIMITED  # never a failure of the work
    found = person_fix((), verdict.error)
    assert found is not None
    assert fix in found
    free_plan = "You've hit your usage limit. Upgrade to Plus to continue using Codex (…), or try again later."
    assert person_fix((), free_plan) is None  # a plan's limit: it resets


async def test_a_held_account_gates_for_a_person_and_vigil_resume_frees_it(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    settings = guard_settings(tmp_path, events, dispatch={"executor": "claude"})
    guard, hook = make_guard(settings)
    now = clock.now_ms()
    rejected = LimitReport("rejected", overage_status="rejected", overage_reason="org_level_disabled")
    outcome = Outcome(OutcomeKind.USAGE_LIMITED, error="usage limit: You've hit your limit", limits=(rejected,))

    await guard.after_outcome(await _claude_task(store), replace(outcome, account="default"))

    gate = await read_gate(store)
    assert (gate.state, gate.until, gate.kind) == (GateState.GATED, None, "account")  # never waited out
    assert "claude:default needs a person: its organisation turned its usage off" in gate.reason
    assert gate.reason.endswith("then run vigil resume")
    (shown,) = accounts_json(settings, await store.loop_values(), now)
    assert (shown["state"], shown["until"]) == ("needs_person", None)
    assert account_line(shown).startswith("claude:default needs you: its organisation turned its usage off")
    clock.set(now + 48 * HOUR)
    assert not (await guard.may_claim(clock.now_ms())).may_claim  # no reset frees it

    assert await release_holds(store, now_ms=clock.now_ms()) == ["claude:default"]
    assert not read_limits(await store.loop_values())["claude:default"].limited(clock.now_ms())
    await hook.drain()
    gated = [e for e in recorded(events) if e["event"] == "gate_changed"]
    assert [e["until"] for e in gated] == [None]


async def test_with_another_account_free_a_held_one_alerts_and_work_goes_on(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    settings = guard_settings(tmp_path, events, dispatch={"executor": "claude"}, executors={"claude": TWO_ACCOUNTS})
    guard, hook = make_guard(settings)
    now = clock.now_ms()
    outcome = Outcome(OutcomeKind.USAGE_LIMITED, error=f"usage limit: {SPEND_TEXT}", account="a")

    await guard.after_outcome(await _claude_task(store), outcome)

    assert (await guard.may_claim(now)).may_claim
    limits = read_limits(await store.loop_values())
    assert (limits["claude:a"].until, pick(settings, "claude", limits, now).account) == (HELD_UNTIL, "b")
    await hook.drain()
    (held,) = [e for e in recorded(events) if e["event"] == "account_held"]
    assert held["account"] == "claude:a"
    assert "raise it at claude.ai/settings/usage" in held["message"]


async def test_the_reserve_stops_unattended_work_until_its_window_resets(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    reserved = {"accounts": [{"name": "main", "config_dir": "m", "reserve": 0.2}]}
    settings = guard_settings(
        tmp_path, tmp_path / "e.jsonl", dispatch={"executor": "claude"}, executors={"claude": reserved}
    )
    guard, _ = make_guard(settings)
    now = clock.now_ms()
    task = await _claude_task(store)

    def used(share: float) -> Outcome:
        report = LimitReport("allowed_warning", "five_hour", now + 2 * HOUR, share, 5 * HOUR)
        return Outcome(OutcomeKind.SUCCESS, account="main", limits=(report,))

    await guard.after_outcome(task, used(0.7))  # 30 % left: more than the reserve
    assert (await guard.may_claim(now)).may_claim
    (shown,) = accounts_json(settings, await store.loop_values(), now)
    assert account_line(shown) == f"claude:main free · 5h 70% used, resets {when_text(now + 2 * HOUR, now)}"

    await guard.after_outcome(task, used(0.85))  # 15 % left: less than the 20 % kept
    decision = await guard.may_claim(now)
    # the gate lasts until the window resets (the loop itself wakes earlier, at
    # [alerts] held_loop, to tell people of a long hold)
    assert (decision.may_claim, (await read_gate(store)).until) == (False, now + 2 * HOUR)
    assert "reserve: 5h window 85% used, 20% kept for you" in decision.reason
    (shown,) = accounts_json(settings, await store.loop_values(), now)
    assert (shown["state"], shown["kind"], shown["reserve"]) == ("reserved", "reserve", 0.2)
    assert account_line(shown).startswith(f"claude:main reserved until {when_text(now + 2 * HOUR, now)} (in 2h00m)")

    await guard.after_outcome(task, used(0.5))  # a later report leaves more: free again
    assert not read_limits(await store.loop_values())["claude:main"].limited(now)
    assert read_windows(await store.loop_values())["claude:main"]["five_hour"].report.utilization == 0.5

    await guard.after_outcome(task, used(0.9))
    clock.set(now + 2 * HOUR)  # the window resets: work resumes by itself
    assert (await guard.may_claim(clock.now_ms())).may_claim


def test_a_reserve_is_a_share_of_the_window(tmp_path: Path) -> None:
    bad = {"accounts": [{"name": "main", "config_dir": "m", "reserve": 20}]}
    with pytest.raises(ConfigError, match="reserve: expected a share of the window between 0 and 1"):
        guard_settings(tmp_path, tmp_path / "e.jsonl", executors={"claude": bad})


async def test_a_report_that_names_no_use_keeps_the_use_last_named_for_that_window(
    store: SqliteStore, clock: ManualClock
) -> None:
    now = clock.now_ms()
    warning = LimitReport("allowed_warning", "five_hour", now + HOUR, 0.85, 5 * HOUR)
    await record_reports(store, "claude:main", [warning], now)
    await record_reports(store, "claude:main", [LimitReport("allowed", "five_hour", now + HOUR)], now + 1)
    assert read_windows(await store.loop_values())["claude:main"]["five_hour"].report.utilization == 0.85
    next_window = LimitReport("allowed", "five_hour", now + 6 * HOUR)  # a new window: nothing known of it
    await record_reports(store, "claude:main", [next_window], now + HOUR)
    assert read_windows(await store.loop_values())["claude:main"]["five_hour"].report.utilization is None


def test_an_api_workspaces_spend_limit_waits_until_access_comes_back() -> None:
    text = (
        "API Error: 400 You have reached your specified workspace API usage limits. "
        "You will regain access on 2027-01-01 at 00:00 UTC."
    )
    verdict = classify(_stream(result=text, status=400), 1, "", 0)
    assert (verdict.kind, verdict.retry_at) == (OutcomeKind.USAGE_LIMITED, 1_798_761_600_000)
    assert person_fix((), verdict.error) is None  # a reset is named: it ends by itself


async def test_one_models_weekly_limit_stops_only_that_models_tasks(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    """``seven_day_opus``: Opus tasks, and tasks that name no model (the CLI's own
    choice cannot be known), wait for the reset; Sonnet tasks run on; the loop is
    never gated for it."""
    events = tmp_path / "events.jsonl"
    settings = guard_settings(tmp_path, events, dispatch={"executor": "claude"})
    guard, _ = make_guard(settings)
    now = clock.now_ms()
    reset = now + 50 * HOUR
    weekly_opus = LimitReport("rejected", kind="seven_day_opus", resets_at=reset)
    outcome = Outcome(
        OutcomeKind.USAGE_LIMITED,
        error="usage limit: You've hit your Opus limit · resets Mon 9am",
        retry_at=reset,
        limits=(weekly_opus,),
        account="default",
        model="claude-opus-4-6",
    )
    task = await _claude_task(store)

    await guard.after_outcome(replace(task, model="claude-opus-4-6"), outcome)

    assert (await guard.may_claim(now)).may_claim  # no gate: other models' tasks run
    limits = read_limits(await store.loop_values())
    assert pick(settings, "claude", limits, now, model="claude-sonnet-4-5").account == "default"
    assert pick(settings, "claude", limits, now, model="opus").account is None
    assert await guard.deferred(replace(task, model="claude-sonnet-4-5"), ()) is None
    opus = await guard.deferred(replace(task, model="claude-opus-4-6"), ())
    unnamed = await guard.deferred(replace(task, model=None), ())  # conservative
    assert opus is not None
    assert unnamed is not None
    assert opus.until == unnamed.until == reset
    (shown,) = accounts_json(settings, await store.loop_values(), now)
    assert (shown["state"], shown["kind"], shown["model_family"]) == ("limited", "seven_day_opus", "opus")
    assert account_line(shown).startswith(
        f"claude:default limited for Opus tasks (weekly Opus) until {when_text(reset, now)}"
    )
