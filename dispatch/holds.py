"""The loop's holds: gating it for an incident, and telling a person only what needs one.

A hold is the loop gated by a guardrail (``vigil.gate``); an *incident* is a run
of gates of one kind with no attempt getting through in between (a backoff that
lifted itself and whose first attempt met the same outage is the same incident).

* A gate only a person lifts (``auth``, ``refused``, ``failures``) alerts at once:
  ``gate_changed``, state ``gated``, with ``fix``, exactly what to do, ending in
  ``vigil resume``.
* A gate that ends by itself (a usage limit, an outage's backoff) stays quiet
  unless its incident holds the loop for ``[alerts] held_loop`` (default 30
  minutes): then one ``gate_changed`` (state ``gated``, ``ends_by_itself`` true,
  no advice to resume: there is nothing to do), and one more (state ``running``)
  when it is over, once an attempt gets through. A shorter hold sends nothing.

The incident's start and whether it was told are kept on the gate itself
(``held_since``, ``told``), so a restarted dispatcher, or another lane, neither
repeats the alert nor forgets it.

After transient failures the loop waits by how long the outage has lasted, not by
how many attempts failed (``outage_wait_ms``). When a backoff lifts, the first
attempt is a probe: with several lanes, only the dispatcher that lifted the gate
claims, for up to ``PROBE_HOLD_MS``, until an attempt gets through or the probe
fails and the loop backs off again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from dispatch.alerts import AlertHook, make_event
from vigil.clock import iso_utc
from vigil.config import Settings
from vigil.durations import format_duration
from vigil.gate import BACKOFF, GateState, LoopGate, confirm_running, mark_told, read_gate, trip
from vigil.store import Store

log = logging.getLogger("vigil.guard")

ACTOR = "guard"
# After a backoff lifted itself, how long the other lanes wait for its probe (one
# task) before they claim too: a probe that hangs must not hold every lane for long.
PROBE_HOLD_MS = 300_000


def outage_wait_ms(schedule: Sequence[int], outage_ms: int) -> int:
    """The loop's wait after a transient failure, ``outage_ms`` into an outage: the
    longest step of ``schedule`` (``[dispatch] outage_backoff``) not longer than the
    outage so far, the first step at least. A provider that recovers is so probed
    again within about as long as it was down, and never later than the last step."""
    return max((step for step in schedule if step <= outage_ms), default=schedule[0])


class Holds:
    """The gate's incidents for one dispatcher: trip, alert when held long, say when over."""

    def __init__(self, store: Store, settings: Settings, alerts: AlertHook) -> None:
        self._store = store
        self._threshold_ms = settings.alerts.held_loop_ms
        self._lanes = settings.dispatch.lanes  # one lane is one task at a time already
        self._alerts = alerts
        self.lifted: LoopGate | None = None  # a gate this dispatcher lifted, until an attempt gets through

    async def trip(self, reason: str, until: int | None, now_ms: int, kind: str, fix: str = "") -> bool:
        """Gate the loop for ``reason`` until ``until`` (None: a person lifts it, told
        ``fix``). A gate of the same kind as the one it replaces (up, or lifted and
        not yet got through) continues that incident. Returns whether it was set."""
        before = await read_gate(self._store)
        same = before.kind == kind and before.state is not GateState.PAUSED
        held_since = before.held_since if same and before.held_since else now_ms
        told = same and before.told
        tell = until is not None and not told and now_ms - held_since >= self._threshold_ms
        gate = await trip(
            self._store,
            reason=reason,
            until=until,
            by=ACTOR,
            now_ms=now_ms,
            kind=kind,
            held_since=held_since,
            told=told or tell,
        )
        if gate is None:
            log.info("the loop is already stopped for longer; not gating it for: %s", reason)
            return False
        self.lifted = None
        if tell:
            self._held_long(gate, now_ms)
        elif same:
            log.info("loop gated again, still: %s", reason)
        elif until is None:
            fields: dict[str, object] = {"state": "gated", "reason": reason, "until": None, "fix": fix}
            self._alerts.notify(make_event("gate_changed", f"loop gated: {reason}", now_ms, **fields))
        else:
            log.info("loop gated until %s (it ends by itself): %s", iso_utc(until), reason)
        return True

    async def held(self, gate: LoopGate, stored: object, now_ms: int) -> int | None:
        """The closed ``gate`` (``stored``: its value as read): alert once its incident
        has held the loop past the threshold; returns when to look at it again (its
        ``until``, or sooner: when the threshold is reached)."""
        if gate.until is None or gate.told or not gate.kind:
            return gate.until
        began = gate.held_since or gate.since
        if now_ms - began < self._threshold_ms:
            return min(gate.until, began + self._threshold_ms)
        if await mark_told(self._store, stored):  # once, whichever dispatcher gets here first
            self._held_long(gate, now_ms)
        return gate.until

    def probing(self, gate: LoopGate, now_ms: int) -> int | None:
        """While another lane probes after a backoff lifted itself (one task at a
        time), until when this one waits; None: claim."""
        if self._lanes == 1 or gate.state is not GateState.RUNNING or gate.kind != BACKOFF or self.lifted is not None:
            return None
        if now_ms < gate.since + PROBE_HOLD_MS:
            return gate.since + PROBE_HOLD_MS
        self.lifted = gate  # its probe never said: this dispatcher probes now
        return None

    async def confirm_resumed(self, now_ms: int) -> None:
        """An attempt got through after a gate lifted itself: the incident is over.
        Said only of one that held the loop past the threshold (told so, or it
        lifted before anyone looked)."""
        if self.lifted is None:
            return
        self.lifted = None
        confirmed = await confirm_running(self._store, by=ACTOR, now_ms=now_ms)
        if confirmed is None:
            return
        began = confirmed.held_since or confirmed.since
        if not confirmed.told and now_ms - began < self._threshold_ms:
            return  # a short hold: nothing was said, nothing to say
        reason = confirmed.reason.removeprefix("resumed after: ")
        message = f"loop resumed by itself after {format_duration(now_ms - began)}: {reason} is over"
        fields = {"state": "running", "reason": reason, "until": None, "held_since": began}
        self._alerts.notify(make_event("gate_changed", message, now_ms, **fields))

    def _held_long(self, gate: LoopGate, now_ms: int) -> None:
        began = gate.held_since or gate.since
        held = format_duration(now_ms - began)
        message = f"the loop has been held for {held}: {gate.reason}; it resumes by itself at {iso_utc(gate.until)}"
        fields = {"state": "gated", "reason": gate.reason, "until": gate.until, "held_since": began}
        self._alerts.notify(make_event("gate_changed", message, now_ms, **fields, ends_by_itself=True))
