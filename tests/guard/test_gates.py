"""The automatic gates: each trips on its outcome and clears as documented, with the
injected clock for reset times; each gate change reaches the alert hook."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dispatch.notifiers import body_of
from tests.guard.conftest import GuardFactory
from tests.guard.support import a_task, guard_settings, recorded
from vigil.clock import ManualClock
from vigil.gate import GateState, pause, read_gate, resume
from vigil.models import Outcome, OutcomeKind
from vigil.store.sqlite import SqliteStore

HOUR = 3_600_000
HALF_HOUR = HOUR // 2


async def test_a_long_usage_limit_gate_alerts_once_past_the_threshold_and_once_when_over(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    guard, hook = make_guard(guard_settings(tmp_path, events))  # [alerts] held_loop: 30m by default
    start = clock.now_ms()
    reset_at = start + 2 * HOUR
    task = await a_task(store)
    await guard.after_outcome(task, Outcome(OutcomeKind.USAGE_LIMITED, error="limit reached", retry_at=reset_at))

    decision = await guard.may_claim(clock.now_ms())
    assert (decision.may_claim, decision.until) == (False, start + HALF_HOUR)  # the idle loop looks again then
    assert "usage limit" in decision.reason
    clock.set(start + HALF_HOUR - 1)
    assert (await guard.may_claim(clock.now_ms())).until == start + HALF_HOUR
    await hook.drain()
    assert recorded(events) == []  # held less than 30 minutes so far: nothing to tell
    clock.set(start + HALF_HOUR)
    decision = await guard.may_claim(clock.now_ms())
    assert (decision.may_claim, decision.until) == (False, reset_at)
    assert (await guard.may_claim(clock.now_ms() + 60_000)).until == reset_at  # told once, not again
    clock.set(reset_at)
    assert (await guard.may_claim(clock.now_ms())).may_claim
    assert (await read_gate(store)).state is GateState.RUNNING
    await hook.drain()
    (held,) = [e for e in recorded(events) if e["event"] == "gate_changed"]
    assert (held["state"], held["until"], held["ends_by_itself"]) == ("gated", reset_at, True)
    assert held["message"].startswith("the loop has been held for 30m: usage limit: every account is limited")
    assert held["_env_event"] == "gate_changed"
    assert "vigil resume" not in held["message"] + body_of(held)
    assert "Nothing to do: it ends by itself" in body_of(held)
    await guard.after_outcome(task, Outcome(OutcomeKind.SUCCESS, account="default"))
    await hook.drain()
    gate_events = [e for e in recorded(events) if e["event"] == "gate_changed"]
    assert [e["state"] for e in gate_events] == ["gated", "running"]
    assert gate_events[1]["message"].startswith("loop resumed by itself after 2h")
    assert "vigil resume" not in body_of(gate_events[1])


async def test_usage_limit_without_a_reset_time_waits_a_backoff_that_grows_to_the_fallback(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    dispatch = {"usage_limit_fallback": "45m", "retry_backoff": "10m", "min_gate": "1s"}
    guard, _ = make_guard(guard_settings(tmp_path, tmp_path / "e", dispatch=dispatch))
    task = await a_task(store)
    waits = []
    for _ in range(4):
        await guard.after_outcome(task, Outcome(OutcomeKind.USAGE_LIMITED))
        gate = await read_gate(store)
        assert (gate.state, gate.by, gate.kind) == (GateState.GATED, "guard", "usage")
        assert gate.until is not None
        waits.append(gate.until - clock.now_ms())
        clock.set(gate.until)
    minute = 60_000
    # equal jitter: between half and all of 10m, 20m, 40m, then the 45m the fallback allows
    assert [5 * minute <= waits[0] <= 10 * minute, 10 * minute <= waits[1] <= 20 * minute] == [True, True]
    assert 20 * minute <= waits[2] <= 40 * minute
    assert waits[3] <= 45 * minute


async def test_a_reset_already_past_still_gates_for_the_floor_and_a_short_hold_alerts_nothing(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    guard, hook = make_guard(guard_settings(tmp_path, events, dispatch={"min_gate": "30s"}))
    task = await a_task(store)
    for _ in range(5):  # the provider keeps naming a reset 20 s ago
        assert (await guard.may_claim(clock.now_ms())).may_claim
        stale = Outcome(OutcomeKind.USAGE_LIMITED, error="limit", retry_at=clock.now_ms() - 20_000)
        await guard.after_outcome(task, stale)
        gate = await read_gate(store)
        assert (gate.state, gate.until) == (GateState.GATED, clock.now_ms() + 30_000)
        assert not (await guard.may_claim(clock.now_ms() + 29_999)).may_claim
        clock.advance(30_000)
    assert (await guard.may_claim(clock.now_ms())).may_claim
    await guard.after_outcome(task, Outcome(OutcomeKind.SUCCESS))
    await hook.drain()
    assert recorded(events) == []  # held 2.5 minutes in all: nothing a person needs to hear


async def test_auth_failure_gates_until_a_person_resumes(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    guard, hook = make_guard(guard_settings(tmp_path, events))
    task = await a_task(store)
    await guard.after_outcome(task, Outcome(OutcomeKind.AUTH, error="401 invalid x-api-key"))
    clock.advance(30 * 24 * HOUR)
    decision = await guard.may_claim(clock.now_ms())
    assert (decision.may_claim, decision.until) == (False, None)
    assert "auth failure" in decision.reason
    await resume(store, by="human", now_ms=clock.now_ms())
    assert (await guard.may_claim(clock.now_ms())).may_claim
    await hook.drain()
    kinds = [e["event"] for e in recorded(events)]
    assert kinds == ["auth_failed", "gate_changed"]
    assert recorded(events)[0]["task_id"] == task.id
    assert "401" in recorded(events)[0]["message"]
    # a gate a person must lift: alerted at once, saying exactly what to do
    gated = recorded(events)[1]
    assert (gated["state"], gated["until"]) == ("gated", None)
    fix = "log dry-run:default in again (`vigil doctor` checks every account), then run: vigil resume"
    assert body_of(gated).splitlines()[1] == f"To do: {fix}"


async def test_consecutive_failures_gate_and_a_success_resets_the_count(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    settings = guard_settings(tmp_path, tmp_path / "e", limits={"max_consecutive_failures": 3})
    guard, _ = make_guard(settings)
    task = await a_task(store)
    failed = Outcome(OutcomeKind.FAILED, error="tests still red")
    for outcome in (failed, failed, Outcome(OutcomeKind.SUCCESS), failed, failed):
        await guard.after_outcome(task, outcome)
    await guard.after_outcome(task, Outcome(OutcomeKind.CANCELED))  # a person's cancel is not a failure
    await guard.after_outcome(task, Outcome(OutcomeKind.USAGE_LIMITED, retry_at=clock.now_ms()))
    await guard.after_outcome(task, Outcome(OutcomeKind.TRANSIENT))  # the provider's trouble, not the work's
    clock.advance(HOUR)
    assert (await guard.may_claim(clock.now_ms())).may_claim  # the usage gate and the backoff are over
    await guard.after_outcome(task, Outcome(OutcomeKind.TIMEOUT))  # third in a row
    decision = await guard.may_claim(clock.now_ms() + 365 * 24 * HOUR)
    assert (decision.may_claim, decision.until) == (False, None)
    assert "3 failed runs in a row" in decision.reason
    await resume(store, by="human", now_ms=clock.now_ms())
    assert (await guard.may_claim(clock.now_ms())).may_claim
    for _ in range(2):  # after a resume it takes a new run of three
        await guard.after_outcome(task, failed)
        assert (await guard.may_claim(clock.now_ms())).may_claim
    await guard.after_outcome(task, failed)
    assert not (await guard.may_claim(clock.now_ms())).may_claim


async def test_runs_whose_sandbox_could_not_start_gate_the_loop_like_failures(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    settings = guard_settings(tmp_path, tmp_path / "e", limits={"max_consecutive_failures": 3})
    guard, _ = make_guard(settings)
    task = await a_task(store)
    broken = Outcome(OutcomeKind.SANDBOX_FAILED, error="the CLI's sandbox did not start 1 command")
    for _ in range(2):
        await guard.after_outcome(task, broken)
        assert (await guard.may_claim(clock.now_ms())).may_claim
    await guard.after_outcome(task, broken)
    decision = await guard.may_claim(clock.now_ms() + 365 * 24 * HOUR)
    assert (decision.may_claim, decision.until) == (False, None)  # until a person resumes
    assert "3 failed runs in a row" in decision.reason


async def test_the_failure_count_survives_a_restart_and_successes_cost_no_write(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    settings = guard_settings(tmp_path, tmp_path / "e", limits={"max_consecutive_failures": 3})
    task = await a_task(store)
    first, _ = make_guard(settings)
    for _ in range(2):
        await first.after_outcome(task, Outcome(OutcomeKind.FAILED))
    restarted, _ = make_guard(settings)  # a new dispatcher reads the count back
    await restarted.after_outcome(task, Outcome(OutcomeKind.FAILED))
    assert not (await restarted.may_claim(clock.now_ms())).may_claim
    await resume(store, by="human", now_ms=clock.now_ms())

    writes: list[object] = []
    real_set = store.set_loop_values

    async def counting_set(values: Mapping[str, object]) -> None:
        writes.append(values)
        await real_set(values)

    store.set_loop_values = counting_set  # type: ignore[method-assign]
    for _ in range(5):
        await restarted.after_outcome(task, Outcome(OutcomeKind.SUCCESS))
    assert writes == []  # the count was already 0: nothing to commit


async def test_a_person_s_pause_is_not_replaced_by_an_automatic_gate(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    guard, _ = make_guard(guard_settings(tmp_path, tmp_path / "e"))
    await pause(store, reason="maintenance", by="human", now_ms=clock.now_ms())
    await guard.after_outcome(await a_task(store), Outcome(OutcomeKind.USAGE_LIMITED, retry_at=clock.now_ms() + 1))
    clock.advance(HOUR)
    decision = await guard.may_claim(clock.now_ms())
    assert not decision.may_claim
    gate = await read_gate(store)
    assert (gate.state, gate.reason, gate.by) == (GateState.PAUSED, "maintenance", "human")


async def test_a_task_failed_for_good_is_alerted(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    events = tmp_path / "events.jsonl"
    guard, hook = make_guard(guard_settings(tmp_path, events))
    await a_task(store, "flaky deploy")
    claim = await store.claim_next(worker="w", lease_ms=60_000)
    assert claim is not None
    outcome = Outcome(OutcomeKind.FAILED, error="exit 1")
    finished = (await store.record(claim, outcome, worker="w")).task
    await guard.after_outcome(finished, outcome)
    await hook.drain()
    [event] = recorded(events)
    assert (event["event"], event["task_id"], event["subject"], event["outcome"]) == (
        "task_failed",
        finished.id,
        "flaky deploy",
        "failed",
    )


async def test_a_failing_or_hanging_hook_changes_nothing_else(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    for mode, extra in (("fail", {}), ("hang", {"timeout": "1s"})):
        events = tmp_path / f"{mode}.jsonl"
        settings = guard_settings(tmp_path, events, mode, alerts=extra)
        guard, hook = make_guard(settings)
        await resume(store, by="human", now_ms=clock.now_ms())
        await guard.after_outcome(await a_task(store), Outcome(OutcomeKind.AUTH, error="expired"))
        await hook.drain()
        assert (await read_gate(store)).state is GateState.GATED
        assert not (await guard.may_claim(clock.now_ms())).may_claim
        assert len(recorded(events)) == (2 if mode == "fail" else 0)  # a hung hook is killed before it records


async def test_a_missing_hook_program_is_logged_not_raised(
    store: SqliteStore, clock: ManualClock, tmp_path: Path, make_guard: GuardFactory
) -> None:
    settings = guard_settings(tmp_path, tmp_path / "e", alerts={"command": [str(tmp_path / "no-such-program")]})
    guard, hook = make_guard(settings)
    await guard.after_outcome(await a_task(store), Outcome(OutcomeKind.AUTH))
    await hook.drain()
    assert (await read_gate(store)).state is GateState.GATED
