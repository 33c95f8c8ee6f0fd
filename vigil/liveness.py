"""What the loop is doing, as one truth for the TUI's header, ``vigil status`` and
``vigil doctor``: read from ``loop_state`` alone, so it works from any process.

Two facts make it. The dispatcher's heartbeat (``HEARTBEAT_KEY``) says whether a
``vigil run`` holds a lane and is alive (``running``), stopped cleanly, died (its
heartbeat went stale without a ``stopped``) or never ran. The gate (``GATE_KEY``)
says whether it may claim: open, ``paused`` by a person, ``gated`` until a person
resumes it, or *backing off*: gated until a time when it lifts by itself (a usage
limit). A ``vigil run`` that finds every lane taken stands by; it says so under
``STANDBY_KEY`` (one entry per process, refreshed every heartbeat), so a TUI whose
background loop stands by can say so, and ``vigil status`` can list it.

``LoopCondition`` is the one word: a live dispatcher's condition is its gate's
(running, paused, gated, backing off); otherwise it is the process's (standby,
stopped, died, not started), and a closed gate is said beside it.

On the dispatcher's own machine the lock it holds says more than its heartbeat,
and wins (``lock_held``, probed by the caller): the kernel frees it the moment its
holder dies, so a killed dispatcher is DIED at once, not after its heartbeat goes
stale; and it stays held while the holder lives, so a dispatcher that cannot write
its heartbeat (a full disk) is not called dead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from vigil.clock import iso_utc
from vigil.durations import format_duration
from vigil.gate import BACKOFF, GATE_KEY, GateState, LoopGate
from vigil.models import HEARTBEAT_KEY, STALE_BEATS, DispatcherHeartbeat

STANDBY_KEY = "standby"  # {owner: {"pid", "host", "since", "seen_at"}} of processes standing by


class LoopCondition(StrEnum):
    NOT_STARTED = "not started"
    RUNNING = "running"
    STANDBY = "standby"
    STOPPED = "stopped"  # cleanly: it said so as it exited
    DIED = "died"  # its heartbeat went stale without a word
    PAUSED = "paused"
    GATED = "gated"
    BACKING_OFF = "backing off"


@dataclass(frozen=True)
class StandbyProcess:
    """A ``vigil run`` waiting for a free lane; ``seen_at``: its last word (epoch ms)."""

    owner: str
    pid: int
    host: str
    since: int
    seen_at: int

    def to_json(self) -> dict[str, object]:
        return {"pid": self.pid, "host": self.host, "since": self.since, "seen_at": self.seen_at}


def standby_processes(value: object) -> tuple[StandbyProcess, ...]:
    """The entries under ``STANDBY_KEY`` (an unreadable one is skipped), by owner."""
    if not isinstance(value, dict):
        return ()
    found = []
    for owner, entry in value.items():
        if isinstance(entry, dict):
            try:
                fields = (int(entry["pid"]), str(entry["host"]), int(entry["since"]), int(entry["seen_at"]))
            except (KeyError, TypeError, ValueError):
                continue
            found.append(StandbyProcess(str(owner), *fields))
    return tuple(sorted(found, key=lambda p: p.owner))


def stale_after_ms(heartbeat_ms: int) -> int:
    """How old a heartbeat (or a standby word) may be before its process counts as gone."""
    return STALE_BEATS * heartbeat_ms


def with_standby(
    value: object, me: StandbyProcess | None, owner: str, now_ms: int, heartbeat_ms: int
) -> dict[str, object]:
    """``STANDBY_KEY``'s new value: ``owner``'s entry replaced by ``me`` (None:
    removed), and entries of processes gone silent dropped."""
    kept: dict[str, object] = {
        p.owner: p.to_json()
        for p in standby_processes(value)
        if p.owner != owner and now_ms - p.seen_at <= stale_after_ms(heartbeat_ms)
    }
    if me is not None:
        kept[owner] = me.to_json()
    return kept


@dataclass(frozen=True)
class LoopHealth:
    """The loop at ``now_ms``. ``heartbeat`` None: no dispatcher ever wrote one.
    ``standby``: the processes standing by that were heard from lately.
    ``lock_held``: what the dispatcher's lock said on its machine (None: not
    probed, or another machine's dispatcher); ``heartbeat_fresh``: whether its
    heartbeat alone would call it alive."""

    condition: LoopCondition
    heartbeat: DispatcherHeartbeat | None
    gate: LoopGate
    standby: tuple[StandbyProcess, ...]
    now_ms: int
    lock_held: bool | None = None
    heartbeat_fresh: bool = False

    @property
    def dispatching(self) -> bool:
        """A live dispatcher holds a lane (whatever the gate says)."""
        return self.condition in (
            LoopCondition.RUNNING,
            LoopCondition.PAUSED,
            LoopCondition.GATED,
            LoopCondition.BACKING_OFF,
        )

    @property
    def gate_closed(self) -> bool:
        return not self.gate.is_open(self.now_ms)

    def _who(self) -> str:
        beat = self.heartbeat
        return "" if beat is None else f"pid {beat.pid} on {beat.host}"

    def _gate_words(self) -> str:
        gate, now = self.gate, self.now_ms
        by = f" by {gate.by}" if gate.by else ""
        since = f" since {iso_utc(gate.since)}" if gate.since else ""
        if gate.state is GateState.PAUSED:
            return f"PAUSED{by}{since}: {gate.reason} (vigil resume)"
        if gate.until is None:
            return f"GATED{since}: {gate.reason}; a person must run vigil resume"
        wait = format_duration(max(0, gate.until - now))
        if gate.kind == BACKOFF:  # after transient failures: "backing off after 3 …"
            return f"{gate.reason}, next try in {wait} (at {iso_utc(gate.until)})"
        return f"BACKING OFF: {gate.reason}; resumes by itself at {iso_utc(gate.until)} (in {wait})"

    def summary(self) -> str:
        """One line for people: ``running (pid 42 on vm, heartbeat 3s ago)``,
        ``stopped cleanly 5m ago (pid 42 on vm)``, ``PAUSED by human since …``."""
        beat, now, condition = self.heartbeat, self.now_ms, self.condition
        if self.dispatching and beat is None:  # its lock is held: started, no heartbeat written yet
            line = "running (it holds the dispatcher lock), no heartbeat written yet"
            return f"{line}; {self._gate_words()}" if self.gate_closed else line
        if self.dispatching:
            assert beat is not None
            age = format_duration(now - beat.heartbeat_at)
            if not self.heartbeat_fresh:  # alive by its lock
                return (
                    f"running ({self._who()} holds the dispatcher lock), but its heartbeat is {age} old: "
                    "it cannot write the database (a full disk? a stuck lock?)"
                )
            if self.gate_closed:
                return f"{self._gate_words()}; the dispatcher ({self._who()}) claims nothing meanwhile"
            return f"running ({self._who()}, heartbeat {age} ago)"
        if condition is LoopCondition.STANDBY:
            waiting = ", ".join(f"pid {p.pid} on {p.host}" for p in self.standby)
            line = f"standby: {waiting} waits for a free dispatcher lane"
        elif condition is LoopCondition.STOPPED:
            assert beat is not None
            line = f"stopped cleanly {format_duration(now - beat.heartbeat_at)} ago ({self._who()})"
        elif condition is LoopCondition.DIED and self.heartbeat_fresh:  # its lock is free: its holder is gone
            assert beat is not None
            age = format_duration(now - beat.heartbeat_at)
            line = (
                f"DIED: {self._who()} no longer holds the dispatcher lock (last heartbeat {age} ago); "
                "start vigil run again"
            )
        elif condition is LoopCondition.DIED:
            assert beat is not None
            age = format_duration(now - beat.heartbeat_at)
            line = f"DIED: no heartbeat for {age} (last: {self._who()}, {beat.state}); start vigil run again"
        else:
            line = "not started: no vigil run has run on this home yet"
        return f"{line}; {self._gate_words()}" if self.gate_closed else line

    def role_of(self, pid: int) -> str | None:
        """What the process ``pid`` of this host does in the loop: ``dispatching``,
        ``standby`` or None (neither, as far as the store says)."""
        if self.dispatching and self.heartbeat is not None and self.heartbeat.pid == pid:
            return "dispatching"
        if any(p.pid == pid for p in self.standby):
            return "standby"
        return None


def loop_health(
    values: Mapping[str, object], now_ms: int, heartbeat_ms: int, *, lock_held: bool | None = None, host: str = ""
) -> LoopHealth:
    """The loop as ``loop_state``'s ``values`` (``Store.loop_values``) describe it at
    ``now_ms``; ``heartbeat_ms`` is ``[dispatch] heartbeat``. ``lock_held``: whether
    a process of ``host`` (this machine) holds a dispatcher lane's lock (None: not
    probed); it decides for a dispatcher of that host, or for one that wrote no
    heartbeat yet."""
    beat = DispatcherHeartbeat.from_json(values.get(HEARTBEAT_KEY))
    gate = LoopGate.from_json(values.get(GATE_KEY))
    recent = stale_after_ms(heartbeat_ms)
    standby = tuple(p for p in standby_processes(values.get(STANDBY_KEY)) if now_ms - p.seen_at <= recent)
    held = None if beat is not None and beat.host != host else lock_held
    fresh = beat is not None and beat.alive(now_ms, heartbeat_ms)
    alive = fresh if held is None else held
    if alive:
        if gate.is_open(now_ms):
            condition = LoopCondition.RUNNING
        elif gate.state is GateState.PAUSED:
            condition = LoopCondition.PAUSED
        else:
            condition = LoopCondition.GATED if gate.until is None else LoopCondition.BACKING_OFF
    elif standby:
        condition = LoopCondition.STANDBY
    elif beat is None:
        condition = LoopCondition.NOT_STARTED
    else:
        condition = LoopCondition.STOPPED if beat.state == "stopped" else LoopCondition.DIED
    return LoopHealth(condition, beat, gate, standby, now_ms, held, fresh)
