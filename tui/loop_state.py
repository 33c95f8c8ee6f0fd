"""What the loop is doing, read by the app at every change for every screen's loop
line (the queue's header reads its own, with its snapshot, so a frozen queue
stays frozen)."""

from __future__ import annotations

from dataclasses import dataclass

from vigil.gate import GATE_KEY, LoopGate
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat, Task, TaskStatus
from vigil.printable import printable_values
from vigil.store import Store

ACTIVE_LIMIT = 20  # running tasks read (one per lane)


@dataclass(frozen=True)
class LoopState:
    """What the loop line shows: the dispatcher's heartbeat (liveness), the gate,
    the active tasks (from the tasks table) and the next due time (None: nothing)."""

    heartbeat: DispatcherHeartbeat | None
    gate: LoopGate
    active: tuple[Task, ...]
    next_due_at: int | None


async def load_loop(store: Store) -> LoopState:
    """Three bounded queries."""
    values = await store.loop_values()
    state = LoopState(
        heartbeat=DispatcherHeartbeat.from_json(values.get(HEARTBEAT_KEY)),
        gate=LoopGate.from_json(values.get(GATE_KEY)),
        active=tuple(await store.list_tasks(statuses=(TaskStatus.ACTIVE,), limit=ACTIVE_LIMIT)),
        next_due_at=await store.next_due_at(),
    )
    return printable_values(state)  # the agent's note, the gate's reason: see tui.loaders
