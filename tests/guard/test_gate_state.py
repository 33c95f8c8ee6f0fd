"""The loop gate in loop_state: reading odd values, which stop wins, and that an
automatic change never overwrites a person's."""

from __future__ import annotations

from vigil.clock import ManualClock
from vigil.gate import GATE_KEY, GateState, LoopGate, lift_expired, pause, read_gate, resume, trip
from vigil.store.sqlite import SqliteStore

HOUR = 3_600_000


async def test_a_missing_or_unreadable_gate_is_running(store: SqliteStore) -> None:
    assert (await read_gate(store)).state is GateState.RUNNING
    for value in ("paused", [1], {"state": "sleeping"}, {"state": None}):
        await store.set_loop_values({GATE_KEY: value})
        assert (await read_gate(store)).state is GateState.RUNNING
    await store.set_loop_values({GATE_KEY: {"state": "gated", "until": "soon", "reason": 5}})
    gate = await read_gate(store)
    assert (gate.state, gate.until, gate.reason) == (GateState.GATED, None, "5")


async def test_pause_and_resume_report_what_they_replaced(store: SqliteStore, clock: ManualClock) -> None:
    now = clock.now_ms()
    assert (await pause(store, reason="  ", by="human", now_ms=now)).state is GateState.RUNNING
    assert (await read_gate(store)).reason == "no reason given"  # an empty reason still says something
    before = await resume(store, by="human", now_ms=now)
    assert (before.state, before.reason, before.by) == (GateState.PAUSED, "no reason given", "human")
    await trip(store, reason="auth failure", until=None, by="guard", now_ms=now)
    before = await resume(store, by="human", now_ms=now)
    assert (before.state, before.reason) == (GateState.GATED, "auth failure")
    assert (await read_gate(store)).to_json() == {
        "state": "running",
        "reason": "",
        "until": None,
        "since": now,
        "by": "human",
    }


async def test_the_stronger_stop_is_kept(store: SqliteStore, clock: ManualClock) -> None:
    now = clock.now_ms()
    assert await trip(store, reason="limit A", until=now + 2 * HOUR, by="guard", now_ms=now) is not None
    assert await trip(store, reason="limit B", until=now + HOUR, by="guard", now_ms=now) is None  # shorter
    assert (await read_gate(store)).reason == "limit A"
    assert await trip(store, reason="auth", until=None, by="guard", now_ms=now) is not None  # needs a person
    assert await trip(store, reason="limit C", until=now + 9 * HOUR, by="guard", now_ms=now) is None
    assert (await read_gate(store)).reason == "auth"
    await pause(store, reason="by hand", by="human", now_ms=now)
    assert await trip(store, reason="failures", until=None, by="guard", now_ms=now) is None
    assert (await read_gate(store)).state is GateState.PAUSED
    await resume(store, by="human", now_ms=now)
    await trip(store, reason="old limit", until=now - 1, by="guard", now_ms=now)  # already over
    assert await trip(store, reason="new limit", until=now + HOUR, by="guard", now_ms=now) is not None


async def test_lifting_an_expired_gate_never_overwrites_a_change_made_meanwhile(
    store: SqliteStore, clock: ManualClock
) -> None:
    now = clock.now_ms()
    await trip(store, reason="usage limit", until=now + HOUR, by="guard", now_ms=now)
    assert await lift_expired(store, by="guard", now_ms=now + HOUR - 1) is None  # not yet
    stale = (await store.loop_values())[GATE_KEY]
    await pause(store, reason="a person stepped in", by="human", now_ms=now)
    lifted = await lift_expired(store, by="guard", now_ms=now + HOUR, stored=stale)
    assert lifted is None
    assert (await read_gate(store)).state is GateState.PAUSED

    await resume(store, by="human", now_ms=now)
    await trip(store, reason="usage limit", until=now + HOUR, by="guard", now_ms=now)
    lifted = await lift_expired(store, by="guard", now_ms=now + HOUR)
    assert lifted is not None
    assert lifted.reason == "usage limit"
    gate = await read_gate(store)
    assert (gate.state, gate.reason, gate.by) == (GateState.RUNNING, "resumed after: usage limit", "guard")
    assert LoopGate.from_json(gate.to_json()) == gate
