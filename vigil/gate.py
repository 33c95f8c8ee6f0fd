"""The loop gate: whether the dispatcher may claim work, kept in ``loop_state``.

Key ``gate``, a JSON object::

    {"state": "running" | "paused" | "gated", "reason": str,
     "until": epoch_ms | null, "since": epoch_ms, "by": actor, "kind": str}

* ``running``: the dispatcher claims as usual (also when the key is absent);
* ``paused``: a person paused the loop (``vigil pause``); only a person resumes it;
* ``gated``: a guardrail stopped it (every account at its usage limit, a backoff
  after transient failures, an auth failure, a refused start, repeated failures).
  ``until`` is when it resumes by itself; None means a person must resume it.

``kind`` says which guardrail (``usage``, ``backoff``, ``auth``, ``refused``,
``failures``; empty for a person's pause). A gate that lifted itself leaves
``running`` with its kind until an attempt confirms the loop is through
(``confirm_running``): a gate of the same kind tripped in between is the same
incident, not a new one to alert about. An incident's gates carry
``held_since`` (epoch ms: when the incident began) and ``told`` (true once the
alert that it has held the loop long was sent, ``[alerts] held_loop``), both
absent when unset.

While paused or gated the dispatcher claims nothing; sensors keep running. A task
already running when the loop is paused finishes normally.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from vigil.clock import iso_utc
from vigil.store import Store

GATE_KEY = "gate"
NO_REASON = "no reason given"  # a pause's reason when the person gave none ("paused: paused" said nothing)
BACKOFF = "backoff"  # the kind of the gate after transient failures: "backing off after N …"
# The other kinds the dispatcher's guard trips: every account limited (a reset ends
# it), every account left needing a person (a spend limit with no reset …), a login
# refused, a CLI that refuses to start, too many failures in a row.
USAGE, ACCOUNT, AUTH, REFUSED, FAILED_IN_A_ROW = "usage", "account", "auth", "refused", "failures"


class GateState(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    GATED = "gated"


@dataclass(frozen=True, slots=True)
class LoopGate:
    """One value of the gate. ``until`` (epoch ms) only means something when gated."""

    state: GateState = GateState.RUNNING
    reason: str = ""
    until: int | None = None
    since: int = 0
    by: str = ""
    kind: str = ""  # the guardrail; on a running gate: the one that lifted itself, not yet confirmed
    held_since: int = 0  # when the incident began (a gate of the same kind again keeps it); 0: unknown
    told: bool = False  # the incident's "held long" alert was sent

    def is_open(self, now_ms: int) -> bool:
        """Whether the dispatcher may claim at ``now_ms`` (a gate past its ``until`` is open)."""
        if self.state is GateState.RUNNING:
            return True
        return self.state is GateState.GATED and self.until is not None and self.until <= now_ms

    def to_json(self) -> dict[str, object]:
        value: dict[str, object] = {
            "state": str(self.state),
            "reason": self.reason,
            "until": self.until,
            "since": self.since,
            "by": self.by,
        }
        if self.kind:  # a person's pause or resume has none
            value["kind"] = self.kind
        if self.held_since:
            value["held_since"] = self.held_since
        if self.told:
            value["told"] = True
        return value

    @classmethod
    def from_json(cls, value: object) -> LoopGate:
        """The gate a stored value describes; a missing or unreadable one is ``running``."""
        if not isinstance(value, dict):
            return cls()
        try:
            state = GateState(str(value.get("state")))
        except ValueError:
            return cls()
        until, since, held_since = value.get("until"), value.get("since"), value.get("held_since")
        return cls(
            state=state,
            reason=str(value.get("reason") or ""),
            until=until if isinstance(until, int) else None,
            since=since if isinstance(since, int) else 0,
            by=str(value.get("by") or ""),
            kind=str(value.get("kind") or ""),
            held_since=held_since if isinstance(held_since, int) else 0,
            told=value.get("told") is True,
        )


async def read_gate(store: Store) -> LoopGate:
    return LoopGate.from_json((await store.loop_values()).get(GATE_KEY))


async def _set_by_person(store: Store, gate: LoopGate) -> LoopGate:
    """A person's change wins over whatever is there; returns the gate it replaced."""
    while True:
        raw = (await store.loop_values()).get(GATE_KEY)
        if await store.replace_loop_value(GATE_KEY, raw, gate.to_json()):
            return LoopGate.from_json(raw)


async def pause(store: Store, *, reason: str, by: str, now_ms: int) -> LoopGate:
    """Pause the loop until a person resumes it; returns the gate it replaced."""
    return await _set_by_person(store, LoopGate(GateState.PAUSED, reason.strip() or NO_REASON, None, now_ms, by))


async def resume(store: Store, *, by: str, now_ms: int) -> LoopGate:
    """Let the loop claim again, whatever paused or gated it; returns the gate it replaced."""
    return await _set_by_person(store, LoopGate(GateState.RUNNING, "", None, now_ms, by))


def _stronger(current: LoopGate, until: int | None, now_ms: int) -> bool:
    """Whether ``current`` already stops the loop at least as long as a new gate
    until ``until`` would: a pause, a gate only a person lifts, or a later one."""
    if current.state is GateState.PAUSED:
        return True
    if current.state is not GateState.GATED or current.is_open(now_ms):
        return False
    return current.until is None or (until is not None and current.until >= until)


async def trip(
    store: Store,
    *,
    reason: str,
    until: int | None,
    by: str,
    now_ms: int,
    kind: str = "",
    held_since: int = 0,
    told: bool = False,
) -> LoopGate | None:
    """Gate the loop (a guardrail of ``kind``) for the incident that began at
    ``held_since`` (0: now), ``told`` whether its "held long" alert was sent. A
    stronger stop already in place is kept (a person's pause, a gate only a person
    lifts, a gate that lasts longer); returns the new gate, or None when the
    stronger one stays."""
    gate = LoopGate(GateState.GATED, reason, until, now_ms, by, kind, held_since or now_ms, told)
    while True:
        raw = (await store.loop_values()).get(GATE_KEY)
        if _stronger(LoopGate.from_json(raw), until, now_ms):
            return None
        if await store.replace_loop_value(GATE_KEY, raw, gate.to_json()):
            return gate


async def lift_expired(store: Store, *, by: str, now_ms: int, stored: object = None) -> LoopGate | None:
    """Open a gate whose ``until`` has passed; returns the gate it lifted, or None
    when there was none. Conditional: a change made meanwhile (a person paused)
    is never overwritten. ``stored``: the gate's value as the caller just read it
    from the loop state (None: read it here)."""
    raw = (await store.loop_values()).get(GATE_KEY) if stored is None else stored
    gate = LoopGate.from_json(raw)
    if gate.state is not GateState.GATED or gate.until is None or gate.until > now_ms:
        return None
    lifted = LoopGate(
        GateState.RUNNING, f"resumed after: {gate.reason}", None, now_ms, by, gate.kind, gate.held_since, gate.told
    )
    return gate if await store.replace_loop_value(GATE_KEY, raw, lifted.to_json()) else None


async def confirm_running(store: Store, *, by: str, now_ms: int) -> LoopGate | None:
    """An attempt got through after a gate lifted itself: the incident is over.
    Returns the lifted gate it confirms (``running`` with its kind), or None when
    there was none or something changed it meanwhile (conditional, as
    ``lift_expired``)."""
    raw = (await store.loop_values()).get(GATE_KEY)
    gate = LoopGate.from_json(raw)
    if gate.state is not GateState.RUNNING or not gate.kind:
        return None
    confirmed = LoopGate(GateState.RUNNING, gate.reason, None, now_ms, by)
    return gate if await store.replace_loop_value(GATE_KEY, raw, confirmed.to_json()) else None


async def mark_told(store: Store, stored: object) -> bool:
    """Record that the incident of the gate ``stored`` (its value as just read)
    was alerted as held long; False when the gate changed meanwhile or was marked
    already (another dispatcher sent it: conditional, as ``lift_expired``)."""
    gate = LoopGate.from_json(stored)
    if gate.told or not gate.kind:
        return False
    marked = LoopGate(gate.state, gate.reason, gate.until, gate.since, gate.by, gate.kind, gate.held_since, True)
    return await store.replace_loop_value(GATE_KEY, stored, marked.to_json())


def gate_json(gate: LoopGate, now_ms: int) -> dict[str, object]:
    """The gate for ``vigil status --json``: times as ISO 8601, ``until`` None when
    a person must act (or the loop runs)."""
    return {
        "state": str(gate.state),
        "reason": gate.reason,
        "since": iso_utc(gate.since) if gate.since else None,
        "by": gate.by or None,
        "until": iso_utc(gate.until),
        "until_in_s": None if gate.until is None else max(0, gate.until - now_ms) // 1000,
        "kind": gate.kind or None,
    }
