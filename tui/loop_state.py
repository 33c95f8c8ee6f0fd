"""What the loop is doing, read by the app at every change for every screen's loop
line (the queue's header reads its own, with its snapshot, so a frozen queue
stays frozen).

As ``vigil status`` does, it asks the dispatcher lanes' locks too
(``probe_lanes``): the kernel frees a lock the moment its holder dies, so a
killed ``vigil run`` is called died at once, not when its heartbeat goes stale.
Nothing in the database changes when a dispatcher is killed, so the app probes
the locks with the database (``LanesWatch``) and reloads when they change."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from dispatch.lanes import lock_probe
from vigil.config import Settings
from vigil.liveness import LoopHealth, loop_health
from vigil.models import Task, TaskStatus
from vigil.printable import printable_values
from vigil.status import LockProbe
from vigil.store import Store

ACTIVE_LIMIT = 20  # running tasks read (one per lane)


@dataclass(frozen=True)
class LoopState:
    """What the loop line shows: the loop's state as read (its one truth,
    ``health``, is judged at the time shown: a heartbeat ages), the active tasks
    (from the tasks table), the next due time (None: nothing) and what the lanes'
    locks said as it was read (None: not probed, or a PostgreSQL store)."""

    loop_values: Mapping[str, object]
    heartbeat_ms: int
    active: tuple[Task, ...]
    next_due_at: int | None
    lock: LockProbe | None = None

    def health(self, now_ms: int) -> LoopHealth:
        return judged(self.loop_values, now_ms, self.heartbeat_ms, self.lock)

    def paused(self, now_ms: int) -> bool:
        """The gate is closed (paused, gated, backing off): ``L`` resumes."""
        return self.health(now_ms).gate_closed


def judged(values: Mapping[str, object], now_ms: int, heartbeat_ms: int, lock: LockProbe | None) -> LoopHealth:
    """``vigil.liveness``'s one truth, the lock's word included as ``vigil status`` gives it."""
    if lock is None:
        return loop_health(values, now_ms, heartbeat_ms)
    return loop_health(values, now_ms, heartbeat_ms, lock_held=lock.held, host=lock.host)


async def probe_lanes(settings: Settings) -> LockProbe | None:
    """What this machine's dispatcher lanes' locks say now (``dispatch.lanes.lock_probe``),
    probed on a worker thread: a file open, on a slow filesystem, must not stall the
    event loop."""
    return await asyncio.to_thread(lock_probe, settings)


class LanesWatch:
    """Tells the app when the lanes' locks changed (a dispatcher started, stopped or
    was killed), which no change in the database would."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._seen: LockProbe | None = None

    async def changed(self) -> bool:
        """Whether the locks say otherwise than at the previous call (the first: False)."""
        if self.settings.store.url is not None:
            return False  # PostgreSQL: the lock says nothing of other machines
        seen, self._seen = self._seen, await probe_lanes(self.settings)
        return seen is not None and seen != self._seen


async def load_loop(store: Store, settings: Settings) -> LoopState:
    """Three bounded queries and a probe of the lanes' locks."""
    state = LoopState(
        loop_values=await store.loop_values(),
        heartbeat_ms=settings.dispatch.heartbeat_ms,
        active=tuple(await store.list_tasks(statuses=(TaskStatus.ACTIVE,), limit=ACTIVE_LIMIT)),
        next_due_at=await store.next_due_at(),
        lock=await probe_lanes(settings),
    )
    return printable_values(state)  # the agent's note, the gate's reason: see tui.loaders
