"""The dispatcher's heartbeat in ``loop_state`` (``HEARTBEAT_KEY``): who runs, in what
state (idle, running, stopped), since when, and which task.

``vigil status`` and the TUI judge liveness by the heartbeat's age, so it is written
every ``[dispatch] heartbeat`` and whenever the dispatcher goes idle or starts a task.
"""

from __future__ import annotations

import logging
import os
import time

from dispatch.worker_ids import this_host
from vigil.clock import Clock
from vigil.errors import VigilError
from vigil.models import HEARTBEAT_KEY, Claim, DispatcherHeartbeat
from vigil.store import Store

log = logging.getLogger("vigil.dispatch")

WARN_EVERY_S = 60.0  # a heartbeat that keeps failing is logged this seldom


class Heartbeat:
    """Writes one dispatcher's heartbeat; never raises (a failure is logged, once a
    minute while it lasts)."""

    def __init__(self, store: Store, clock: Clock, owner: str) -> None:
        self._store = store
        self._clock = clock
        self._owner = owner
        self._since = clock.now_ms()
        self.note: str | None = None  # the running agent's live note, written with each beat
        self._failing_since: float | None = None  # monotonic seconds of the first failed write in a row
        self._warned_at = 0.0

    async def beat(self, state: str, claim: Claim | None = None) -> None:
        """Record ``state`` (and ``claim``'s task while running)."""
        now = time.monotonic()
        value = DispatcherHeartbeat(
            owner=self._owner,
            pid=os.getpid(),
            host=this_host(),
            since=self._since,
            heartbeat_at=self._clock.now_ms(),
            state=state,
            task_id=None if claim is None else claim.task.id,
            task_started_at=None if claim is None else claim.task.started_at,
            note=self.note if state == "running" else None,
        )
        try:
            await self._store.set_loop_values({HEARTBEAT_KEY: value.to_json()})
        except VigilError as err:
            # every beat fails alike while the disk is full: said once a minute
            if self._failing_since is None or now - self._warned_at >= WARN_EVERY_S:
                log.warning("could not write the heartbeat: %s", err)
                self._warned_at = now
            self._failing_since = self._failing_since or now
            return
        if self._failing_since is not None:
            log.info("the heartbeat is written again (after %.0fs)", now - self._failing_since)
            self._failing_since = None
