"""Holding a lane: standing by until one is free, and dispatching while it is held.

``wait_for_lane`` tries every ``LANE_POLL_S`` (a lane lock that cannot be reached,
such as a PostgreSQL server that is down, is logged and tried again: a 24/7 process
must outlive it). ``dispatch_in_lane`` runs the dispatcher and probes the lane
every ``LANE_CHECK_S``; when the lane is lost the running task is ended at once
(another dispatcher may already hold the lane, and lanes bound how many tasks run)
and requeued without counting the attempt, and the caller goes back to standby.
``StandbyNotice`` says in the store that a process stands by.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable

from dispatch.lanes import LaneLock
from dispatch.loop import Dispatcher
from dispatch.worker_ids import this_host
from vigil.clock import Clock, real_seconds
from vigil.errors import OperationError, VigilError
from vigil.liveness import STANDBY_KEY, StandbyProcess, with_standby
from vigil.store import Store

log = logging.getLogger("vigil.dispatch")

LANE_POLL_S = 1.0  # how often a standby process tries for a lane
LANE_CHECK_S = 1.0  # how often a held lane is probed


async def _stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds``; True when ``stop`` was set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()


async def wait_for_lane(
    lanes: LaneLock, stop: asyncio.Event, *, on_standby: Callable[[], Awaitable[None]] | None = None
) -> bool:
    """Take a lane now, or stand by until one is free (True) or ``stop`` (False).
    ``on_standby`` is awaited once, when standing by begins."""
    announced = False
    while not stop.is_set():
        try:
            if await lanes.try_acquire():
                if announced:
                    log.info("took over dispatcher lane %s", lanes.lane)
                return True
            if not announced:
                who = await lanes.holders()
                log.warning("every dispatcher lane (%d, %s) is held by %s: standing by", lanes.lanes, lanes.where, who)
        except OperationError as err:
            log.error("cannot take a dispatcher lane: %s; trying again", err)
        if not announced:
            announced = True
            if on_standby is not None:
                await on_standby()
        if await _stopped_within(stop, LANE_POLL_S):
            break
    return False


async def dispatch_in_lane(dispatcher: Dispatcher, lanes: LaneLock, stop: asyncio.Event) -> bool:
    """Run ``dispatcher`` until ``stop`` (returns False) or until the lane is lost
    (returns True; the running task was ended and given back). The ``stopped``
    heartbeat is not written: see ``release_lane``."""
    run_stop = asyncio.Event()
    lost = False

    async def watch_lane() -> None:
        nonlocal lost
        try:
            while not await _stopped_within(stop, LANE_CHECK_S):
                if not await lanes.still_held():
                    lost = True
                    log.error("lost dispatcher lane: not claiming; ending the running task")
                    dispatcher.hurry("the dispatcher lost its lane")
                    return
        finally:
            run_stop.set()

    watcher = asyncio.create_task(watch_lane())
    try:
        await dispatcher.run_forever(run_stop, mark_stopped=False)
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    return lost


async def release_lane(dispatcher: Dispatcher, lanes: LaneLock) -> None:
    """Give the lane up after a clean stop, then write the ``stopped`` heartbeat
    only if no other dispatcher holds a lane: the heartbeat is one value that every
    dispatcher writes, and the loop has not stopped while others run. Releasing
    first means that of several dispatchers stopping at once, the last one to
    release sees no other lane held and says the loop stopped."""
    await lanes.release()
    if await lanes.others_held():
        log.info("other dispatchers still hold lanes: the loop goes on without this one")
        return
    await dispatcher.mark_stopped()


class StandbyNotice:
    """While this process stands by, it says so under ``STANDBY_KEY`` (its pid, host,
    since when), refreshed every heartbeat, so ``vigil status`` and a TUI whose
    background loop this is can tell a standby process from a dispatching one
    (``vigil.liveness``). ``stop`` takes the entry away. Never raises: a failed
    write is logged, and the entry of a process that went silent ages out."""

    def __init__(self, store: Store, clock: Clock, owner: str, heartbeat_ms: int) -> None:
        self._store = store
        self._clock = clock
        self._owner = owner
        self._heartbeat_ms = heartbeat_ms
        self._since = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._task is None:
            self._since = self._clock.now_ms()
            self._task = asyncio.create_task(self._keep_saying())

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        await self._write(None)

    async def _keep_saying(self) -> None:
        while True:
            now = self._clock.now_ms()
            await self._write(StandbyProcess(self._owner, os.getpid(), this_host(), self._since, now))
            await asyncio.sleep(real_seconds(self._clock, self._heartbeat_ms))

    async def _write(self, me: StandbyProcess | None) -> None:
        try:
            while True:  # conditional: other standby processes write the same key
                raw = (await self._store.loop_values()).get(STANDBY_KEY)
                value = with_standby(raw, me, self._owner, self._clock.now_ms(), self._heartbeat_ms)
                if await self._store.replace_loop_value(STANDBY_KEY, raw, value):
                    return
        except VigilError as err:
            log.warning("could not say this process stands by: %s", err)
