"""Limits and outages through the guard, on the injected clock: a usage limit stops
one account; the loop waits only when every account (and every fallback) is
limited, until the earliest reset; transient failures back off and end by
themselves; a task whose skill forbids fallback waits unrun."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dispatch.accounts import pick
from dispatch.holds import PROBE_HOLD_MS
from dispatch.skills import load_skills
from tests.guard.conftest import GuardFactory
from tests.guard.support import a_task, guard_settings, recorded
from vigil.accounts import read_limits
from vigil.clock import ManualClock
from vigil.gate import BACKOFF, GATE_KEY, GateState, read_gate
from vigil.liveness import loop_health
from vigil.models import NewTask, Outcome, OutcomeKind, Task
from vigil.store.sqlite import SqliteStore

MINUTE = 60_000
HOUR = 60 * MINUTE
TWO_ACCOUNTS = {"accounts": [{"name": "a", "config_dir": "a"}, {"name": "b", "config_dir": "b"}]}


async def _claude_task(store: SqliteStore, subject: str = "work") -> Task:
    return replace(await a_task(store, subject), executor="claude")


def _limited(account: str, reset: int) -> Outcome:
    return Outcome(OutcomeKind.USAGE_LIMITED, error=f"{account} hit its limit", retry_at=reset, account=account)


async def test_a_limit_stops_one_account_and_the_loop_waits_only_when_all_are_limited(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    settings = guard_settings(tmp_path, events, dispatch={"executor": "claude"}, executors={"claude": TWO_ACCOUNTS})
    guard, hook = make_guard(settings)
    task = await _claude_task(store)
    now = clock.now_ms()

    await guard.after_outcome(task, _limited("a", now + 5 * HOUR))
    assert (await guard.may_claim(now)).may_claim  # b is free: the loop goes on
    limits = read_limits(await store.loop_values())
    assert (limits["claude:a"].until, pick(settings, "claude", limits, now).account) == (now + 5 * HOUR, "b")

    await guard.after_outcome(task, _limited("b", now + 7 * HOUR))
    decision = await guard.may_claim(now)
    assert (decision.may_claim, decision.until) == (False, now + HOUR // 2)  # asks again when held long
    assert "every account is limited" in decision.reason
    assert (await read_gate(store)).until == now + 5 * HOUR  # the earliest reset

    clock.set(now + 5 * HOUR)
    assert (await guard.may_claim(clock.now_ms())).may_claim
    limits = read_limits(await store.loop_values())
    assert pick(settings, "claude", limits, clock.now_ms()).account == "a"  # used again after its reset
    await guard.after_outcome(task, Outcome(OutcomeKind.SUCCESS, account="a"))
    await hook.drain()
    # nobody looked while it was held (the loop would have, at 30 minutes): only its end is told
    assert [e["state"] for e in recorded(events) if e["event"] == "gate_changed"] == ["running"]
    assert read_limits(await store.loop_values())["claude:a"].in_a_row == 0


async def test_the_least_recently_limited_free_account_goes_first(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    three = {"accounts": [{"name": n, "config_dir": n} for n in ("a", "b", "c")]}
    settings = guard_settings(tmp_path, tmp_path / "e", dispatch={"executor": "claude"}, executors={"claude": three})
    guard, _ = make_guard(settings)
    task = await _claude_task(store)
    start = clock.now_ms()
    await guard.after_outcome(task, _limited("a", start + MINUTE))
    clock.advance(10_000)
    await guard.after_outcome(task, _limited("c", start + MINUTE))
    limits = read_limits(await store.loop_values())
    assert pick(settings, "claude", limits, clock.now_ms()).account == "b"  # never limited
    await guard.after_outcome(task, _limited("b", start + 2 * MINUTE))
    clock.set(start + MINUTE)
    limits = read_limits(await store.loop_values())
    assert pick(settings, "claude", limits, clock.now_ms()).account == "a"  # limited longest ago


async def test_with_a_fallback_the_loop_goes_on_and_a_skill_may_forbid_it(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    skill = tmp_path / "skills" / "claude-only"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\ndescription: Only Claude.\nfallback: false\n---\nDo it.\n")
    settings = guard_settings(tmp_path, tmp_path / "e", dispatch={"executor": "claude", "fallback": ["codex"]})
    guard, _ = make_guard(settings)
    now = clock.now_ms()
    await guard.after_outcome(await _claude_task(store), _limited("default", now + HOUR))
    assert (await guard.may_claim(now)).may_claim  # codex is free
    limits = read_limits(await store.loop_values())
    assert (pick(settings, "claude", limits, now).executor, pick(settings, "claude", limits, now).account) == (
        "codex",
        "default",
    )

    await store.add_task(NewTask("only on claude", skills=("claude-only",)))
    own = (await store.list_tasks())[0]
    deferral = await guard.deferred(own, load_skills(settings.skills_dir, own.skills))
    assert deferral is not None
    assert deferral.until == now + HOUR
    assert await guard.deferred(await _claude_task(store, "any"), []) is None


async def test_transient_failures_back_off_by_how_long_the_outage_lasted_and_end_by_themselves(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    # the default schedule, 30s 1m 2m 5m 10m; never a person's gate, though max_consecutive_failures is 2
    settings = guard_settings(tmp_path, events, dispatch={"min_gate": "1s"}, limits={"max_consecutive_failures": 2})
    guard, hook = make_guard(settings)
    task = await a_task(store)

    async def outage(runs_s: list[int]) -> list[int]:
        """Probes that each fail after running ``runs_s[n]`` seconds; the loop's waits."""
        waits = []
        for n, run_s in enumerate(runs_s, start=1):
            assert (await guard.may_claim(clock.now_ms())).may_claim
            clock.advance(run_s * 1000)
            kind = OutcomeKind.STALLED if n == 3 else OutcomeKind.TRANSIENT
            await guard.after_outcome(task, Outcome(kind, error="API error: 529 overloaded"))
            gate = await read_gate(store)
            assert (gate.state, gate.kind, gate.by) == (GateState.GATED, BACKOFF, "guard")
            assert gate.until is not None
            waits.append((gate.until - clock.now_ms()) // 1000)
            shown = loop_health({GATE_KEY: gate.to_json()}, clock.now_ms(), 15_000).summary()
            assert f"; backing off after {n} transient failure{'' if n == 1 else 's'}, next try in " in shown
            while not (decision := await guard.may_claim(clock.now_ms())).may_claim:  # as the idle loop does
                assert decision.until is not None
                clock.set(decision.until)
        return waits

    # a short outage: waits of 30 s while it is young, and nothing said to a person
    assert await outage([5, 5]) == [30, 30]
    await guard.after_outcome(task, Outcome(OutcomeKind.SUCCESS))
    await hook.drain()
    assert recorded(events) == []
    # a long one: the wait is the longest step not longer than the outage so far, whatever
    # the number of failures (a probe that ran 2 minutes moves the schedule on)
    waits = await outage([0, 0, 0, 0, 0, 120, 0, 0, 0])
    assert waits == [30, 30, 60, 120, 120, 300, 600, 600, 600]  # failed at 0s 30s 1m 2m 4m 8m 13m 23m 33m
    await guard.after_outcome(task, Outcome(OutcomeKind.SUCCESS))
    await hook.drain()
    told = [e for e in recorded(events) if e["event"] == "gate_changed"]
    assert [e["state"] for e in told] == ["gated", "running"]  # once past 30 minutes held, once over
    assert told[0]["message"].startswith("the loop has been held for 30m: backing off after 8 transient failures")
    assert told[1]["message"].startswith("loop resumed by itself after 43m")

    await guard.after_outcome(task, Outcome(OutcomeKind.TRANSIENT))
    gate = await read_gate(store)
    assert gate.reason == "backing off after 1 transient failure"  # the outage ended: a new one starts young
    assert gate.until == clock.now_ms() + 30_000


async def test_after_a_backoff_lifts_one_lane_probes_and_the_others_follow_once_it_got_through(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    settings = guard_settings(tmp_path, tmp_path / "e", dispatch={"lanes": 2, "outage_backoff": ["10s", "20s"]})
    prober, _ = make_guard(settings)
    other, _ = make_guard(settings)
    task = await a_task(store)
    await prober.after_outcome(task, Outcome(OutcomeKind.TRANSIENT, error="529"))
    clock.advance(30_000)
    assert (await prober.may_claim(clock.now_ms())).may_claim  # it lifted the backoff: its task is the probe
    decision = await other.may_claim(clock.now_ms())
    assert (decision.may_claim, decision.until) == (False, clock.now_ms() + PROBE_HOLD_MS)
    await prober.after_outcome(task, Outcome(OutcomeKind.TRANSIENT, error="529 again"))  # still down
    assert not (await other.may_claim(clock.now_ms())).may_claim
    clock.advance(30_000)
    assert (await other.may_claim(clock.now_ms())).may_claim  # this time the other one lifted it and probes
    assert not (await prober.may_claim(clock.now_ms())).may_claim
    await other.after_outcome(task, Outcome(OutcomeKind.SUCCESS))  # the provider is back
    assert (await prober.may_claim(clock.now_ms())).may_claim


async def test_a_fallback_that_cannot_start_is_skipped_with_one_alert_and_the_loop_waits_for_the_reset(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    settings = guard_settings(tmp_path, events, dispatch={"executor": "claude", "fallback": ["codex"]})
    guard, hook = make_guard(settings)
    now = clock.now_ms()
    reset = now + 10 * MINUTE
    await guard.after_outcome(await _claude_task(store), _limited("default", reset))
    assert (await guard.may_claim(now)).may_claim  # Codex is free, as far as anyone knows
    missing = Outcome(OutcomeKind.REFUSED, error="cannot run codex-missing: No such file or directory")
    on_codex = replace(await a_task(store, "fell back"), executor="codex")
    for _ in range(2):  # a second task claimed meanwhile meets the same: said once
        await guard.after_outcome(on_codex, replace(missing, account="default"))
        gate = await read_gate(store)
        # not a person's gate: it waits for Claude's reset, the first account free again
        assert (gate.state, gate.kind, gate.until) == (GateState.GATED, "usage", reset)
    limits = read_limits(await store.loop_values())
    assert limits["codex:default"].reason.startswith("skipped, cannot start: refused: cannot run codex-missing")
    assert pick(settings, "claude", limits, reset).executor == "claude"

    clock.set(reset)
    assert (await guard.may_claim(reset)).may_claim
    await guard.after_outcome(await _claude_task(store), Outcome(OutcomeKind.SUCCESS, account="default"))
    await hook.drain()
    (alert,) = recorded(events)  # one alert, and no gate to tell of: it held 10 minutes
    assert (alert["event"], alert["account"]) == ("fallback_skipped", "codex:default")
    assert "take it out of [dispatch] fallback" in alert["fix"]
    assert (await read_gate(store)).state is GateState.RUNNING


async def test_the_configured_executor_that_cannot_start_still_waits_for_a_person(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    settings = guard_settings(tmp_path, events, dispatch={"executor": "claude", "fallback": ["codex"]})
    guard, hook = make_guard(settings)
    refused = Outcome(OutcomeKind.REFUSED, error="cannot run claude-missing", account="default")
    await guard.after_outcome(await _claude_task(store), refused)
    gate = await read_gate(store)
    assert (gate.state, gate.kind, gate.until) == (GateState.GATED, "refused", None)
    await hook.drain()
    (alert,) = recorded(events)
    assert (alert["event"], alert["state"]) == ("gate_changed", "gated")
    assert alert["fix"] == "change [executors.claude] in vigil.toml (see `vigil doctor`), then run: vigil resume"


async def test_with_the_fallback_limited_too_the_loop_waits_for_the_first_reset_of_either(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    settings = guard_settings(tmp_path, tmp_path / "e", dispatch={"executor": "claude", "fallback": ["codex"]})
    guard, _ = make_guard(settings)
    now = clock.now_ms()
    await guard.after_outcome(await _claude_task(store), _limited("default", now + 10 * MINUTE))
    on_codex = replace(await a_task(store, "fell back"), executor="codex")
    await guard.after_outcome(on_codex, _limited("default", now + HOUR))
    gate = await read_gate(store)
    assert (gate.state, gate.until) == (GateState.GATED, now + 10 * MINUTE)  # Claude's, not Codex's
