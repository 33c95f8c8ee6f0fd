"""What the loop is doing, read by the app at every change for every screen's loop
line (the queue's header reads its own, with its snapshot, so a frozen queue
stays frozen)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vigil.liveness import LoopHealth, loop_health
from vigil.models import Task, TaskStatus
from vigil.printable import printable_values
from vigil.store import Store

ACTIVE_LIMIT = 20  # running tasks read (one per lane)


@dataclass(frozen=True)
class LoopState:
    """What the loop line shows: the loop's state as read (its one truth,
    ``health``, is judged at the time shown: a heartbeat ages), the active tasks
    (from the tasks table) and the next due time (None: nothing)."""

    loop_values: Mapping[str, object]
    heartbeat_ms: int
    active: tuple[Task, ...]
    next_due_at: int | None

    def health(self, now_ms: int) -> LoopHealth:
        return loop_health(self.loop_values, now_ms, self.heartbeat_ms)

    def paused(self, now_ms: int) -> bool:
        """The gate is closed (paused, gated, backing off): ``L`` resumes."""
        return self.health(now_ms).gate_closed


async def load_loop(store: Store, heartbeat_ms: int) -> LoopState:
    """Three bounded queries."""
    state = LoopState(
        loop_values=await store.loop_values(),
        heartbeat_ms=heartbeat_ms,
        active=tuple(await store.list_tasks(statuses=(TaskStatus.ACTIVE,), limit=ACTIVE_LIMIT)),
        next_due_at=await store.next_due_at(),
    )
    return printable_values(state)  # the agent's note, the gate's reason: see tui.loaders
