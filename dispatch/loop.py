"""The dispatcher: claim → run → record, one task at a time, until told to stop.

``Dispatcher.run_once()`` claims the most urgent due task, runs it through its
executor and records what became of it (docs/running.md). ``run_forever(stop)``
repeats that, and when nothing is due sleeps until the next task is due, until
``wake()`` is called (sensors in this process), or until another process commits to
the database (``PRAGMA data_version``, polled every ``poll_s``).

While a task runs, a heartbeat renews its lease every ``[dispatch] heartbeat`` and
honours a cancel request. The dispatcher's own state (idle, running, stopped) is
written to ``loop_state`` under ``HEARTBEAT_KEY`` on every change and every
heartbeat, for ``vigil status`` and the TUI.

Only the truly unexpected exception from an executor is caught, in ``_outcome_of``,
and recorded as a transient crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import replace

from dispatch.attempt import prepare_attempt
from dispatch.executors import Executor, RunContext
from dispatch.retry import RETRYABLE, Finish, decide, gave_up
from vigil.clock import Clock
from vigil.config import Settings
from vigil.errors import InputError, InvalidTransition, VigilError
from vigil.models import HEARTBEAT_KEY, Claim, DispatcherHeartbeat, Outcome, OutcomeKind, Task
from vigil.store import Store

log = logging.getLogger("vigil.dispatch")

ExecutorFactory = Callable[[str], Executor]
"""Returns the executor for a name from config or a skill (``claude``, ``dry-run`` …)."""

POLL_S = 0.15  # data_version probe interval while idle: a few µs per probe
STOP_POLL_S = 0.2  # how often a stopping dispatcher checks for a second signal
ERROR_PAUSE_S = 1.0  # after a failed step (database trouble), before trying again


def new_worker_id() -> str:
    """``<host>:<pid>:<random>``: unique per dispatcher process start."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Dispatcher:
    """Runs due tasks one at a time. Not thread-safe; one per process and lock."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        executor_factory: ExecutorFactory,
        clock: Clock,
        worker_id: str,
        *,
        rng: random.Random | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        self._store = store
        self._settings = settings
        self._executors = executor_factory
        self._clock = clock
        self.worker_id = worker_id
        self._rng = rng or random.Random()
        self._poll_s = poll_s
        self._wakeup = asyncio.Event()
        self._stop: asyncio.Event | None = None
        self._hurry = False
        self._since = clock.now_ms()

    # --- control -------------------------------------------------------------------
    def wake(self) -> None:
        """Look for due tasks now (a sensor in this process added some)."""
        self._wakeup.set()

    def hurry(self) -> None:
        """Cut a stop's grace period short: end the running task now."""
        self._hurry = True

    # --- the step ------------------------------------------------------------------
    async def run_once(self, stop: asyncio.Event | None = None) -> Task | None:
        """Claim the most urgent due task, run it, record it. Returns the task as
        recorded (finished or requeued), or None when nothing was due. ``stop``
        set while the task runs starts the graceful stop (docs/running.md)."""
        if stop is not None:
            self._stop = stop
        claim = await self._store.claim_next(
            worker=self.worker_id,
            lease_ms=self._settings.dispatch.lease_ms,
            executor=self._settings.dispatch.executor,
        )
        if claim is None:
            return None
        log.info("task #%d started (attempt %d): %s", claim.task.id, claim.attempt, claim.task.subject)
        await self._beat("running", claim)
        try:
            executor_name, ctx = await prepare_attempt(self._store, self._settings, claim)
            executor = self._executors(executor_name)
        except InputError as err:  # an unknown skill, a bad skill file: the task's fault
            outcome = Outcome(OutcomeKind.FAILED, summary=str(err), error=str(err))
            stopped = False
        else:
            outcome, stopped = await self._run(executor, claim.task, ctx, claim)
        task = await self._record(claim, outcome, stopped=stopped)
        log.info("task #%d %s (%s)%s", task.id, task.status, outcome.kind, _brief(outcome))
        return task

    async def _run(self, executor: Executor, task: Task, ctx: RunContext, claim: Claim) -> tuple[Outcome, bool]:
        """Run the executor as its own asyncio task and watch over it: heartbeat,
        cancel requests, graceful stop. Returns the outcome and whether a stop
        interrupted it."""
        run = asyncio.create_task(executor.run(task, ctx))
        heartbeat_s = self._settings.dispatch.heartbeat_ms / 1000
        next_beat = time.monotonic() + heartbeat_s
        stop_deadline: float | None = None
        stopping = asyncio.ensure_future(self._stop.wait()) if self._stop is not None else None
        try:
            while not run.done():
                now = time.monotonic()
                timeout = next_beat - now
                if stop_deadline is not None:
                    timeout = min(timeout, stop_deadline - now, STOP_POLL_S)
                waits: set[asyncio.Future[object]] = {run}  # type: ignore[arg-type]
                if stopping is not None and not stopping.done():
                    waits.add(stopping)  # type: ignore[arg-type]
                await asyncio.wait(waits, timeout=max(timeout, 0), return_when=asyncio.FIRST_COMPLETED)
                if run.done():
                    break
                now = time.monotonic()
                if stopping is not None and stopping.done() and stop_deadline is None:
                    grace_s = self._settings.dispatch.shutdown_grace_ms / 1000
                    log.info("stopping: task #%d gets %.0fs to finish", task.id, grace_s)
                    stop_deadline = now + grace_s
                if stop_deadline is not None and (now >= stop_deadline or self._hurry):
                    interrupted = Outcome(
                        OutcomeKind.INTERRUPTED, summary="interrupted: vigil was stopped", error="dispatcher stopped"
                    )
                    return await _cancel(run, interrupted), True
                if now >= next_beat:
                    next_beat = now + heartbeat_s
                    cancel = await self._renew(claim)
                    if cancel is not None:
                        return await _cancel(run, cancel), False
            return _outcome_of(run), False
        except asyncio.CancelledError:
            # We are being torn down: the executor must end its process group too.
            run.cancel()
            await asyncio.wait({run}, timeout=self._settings.dispatch.shutdown_grace_ms / 1000 + 10)
            raise
        finally:
            if stopping is not None:
                stopping.cancel()

    async def _renew(self, claim: Claim) -> Outcome | None:
        """Renew the lease and the heartbeat. Returns the outcome to end the run
        with (canceled, or lost claim), or None to go on."""
        lease_until = self._clock.now_ms() + self._settings.dispatch.lease_ms
        try:
            cancel_requested = await self._store.renew_lease(
                claim.task.id, worker=self.worker_id, lease_until=lease_until
            )
        except InvalidTransition as err:
            log.error("task #%d: lost its claim (%s); ending the run", claim.task.id, err)
            return Outcome(OutcomeKind.INTERRUPTED, summary="interrupted: claim lost", error=str(err))
        except VigilError as err:  # the database is busy or unwell: try again next beat
            log.warning("task #%d: could not renew the lease: %s", claim.task.id, err)
            return None
        await self._beat("running", claim)
        if cancel_requested:
            log.info("task #%d: cancel requested; ending the run", claim.task.id)
            return Outcome(OutcomeKind.CANCELED, summary="canceled while running", error="cancel requested")
        return None

    async def _record(self, claim: Claim, outcome: Outcome, *, stopped: bool) -> Task:
        """Finish or requeue the task according to the retry policy."""
        now = self._clock.now_ms()
        worker = self.worker_id
        if stopped:
            # The operator stopped the service: not the task's failure, so the attempt
            # is given back; the run stays recorded as interrupted.
            return await self._store.requeue(claim, outcome, retry_at=now, count_attempt=False, worker=worker)
        decision = decide(claim.task, outcome, self._settings.dispatch, now, self._rng)
        if isinstance(decision, Finish):
            if outcome.kind in RETRYABLE:
                reason = outcome.summary or outcome.error or str(outcome.kind)
                outcome = replace(outcome, summary=gave_up(claim.task.attempt_count, reason))
            return await self._store.finish(claim, outcome, decision.status, worker=worker)
        log.info(
            "task #%d: retry in %.0fs%s",
            claim.task.id,
            (decision.retry_at - now) / 1000,
            "" if decision.count_attempt else " (attempt not counted)",
        )
        return await self._store.requeue(
            claim, outcome, retry_at=decision.retry_at, count_attempt=decision.count_attempt, worker=worker
        )

    # --- forever -------------------------------------------------------------------
    async def run_forever(self, stop: asyncio.Event) -> None:
        """Run due tasks until ``stop`` is set; then write the ``stopped`` heartbeat.

        A step that fails on the database is logged and tried again after a pause:
        a 24/7 loop must outlive a locked or briefly unavailable file.
        """
        self._stop = stop
        await self._beat("idle")
        try:
            while not stop.is_set():
                # Cleared before looking, so a wake-up during the claim is not lost.
                self._wakeup.clear()
                try:
                    task = await self.run_once(stop)
                    if task is None:
                        await self._idle(stop)
                        await self._beat("idle")
                except VigilError as err:
                    log.error("dispatch step failed: %s", err)
                    await _wait_event(stop, ERROR_PAUSE_S)
        finally:
            await self.mark_stopped()

    async def mark_stopped(self) -> None:
        """Write the ``stopped`` heartbeat (a clean exit, not a death)."""
        await self._beat("stopped")

    async def _idle(self, stop: asyncio.Event) -> None:
        """Sleep until a task may be due: its due time, a wake-up, a commit by
        another process, or ``stop``. Returns after at least one probe, so a task
        that is due but not claimable cannot make the loop spin."""
        next_due = await self._store.next_due_at()
        version = await self._store.data_version()
        heartbeat_s = self._settings.dispatch.heartbeat_ms / 1000
        next_beat = time.monotonic() + heartbeat_s
        waiters = [asyncio.ensure_future(self._wakeup.wait()), asyncio.ensure_future(stop.wait())]
        try:
            while True:
                timeout = self._poll_s
                if next_due is not None:
                    timeout = min(timeout, max((next_due - self._clock.now_ms()) / 1000, 0.001))
                done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                if done or await self._store.data_version() != version:
                    return
                if next_due is not None and self._clock.now_ms() >= next_due:
                    return
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + heartbeat_s
                    await self._beat("idle")
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _beat(self, state: str, claim: Claim | None = None) -> None:
        """Write the dispatcher heartbeat; a failure is logged, never raised."""
        host, pid = socket.gethostname(), os.getpid()
        beat = DispatcherHeartbeat(
            owner=self.worker_id,
            pid=pid,
            host=host,
            since=self._since,
            heartbeat_at=self._clock.now_ms(),
            state=state,
            task_id=None if claim is None else claim.task.id,
            task_started_at=None if claim is None else claim.task.started_at,
        )
        try:
            await self._store.set_loop_values({HEARTBEAT_KEY: beat.to_json()})
        except VigilError as err:
            log.warning("could not write the heartbeat: %s", err)


def _outcome_of(run: asyncio.Task[Outcome]) -> Outcome:
    """The finished executor task's outcome. The one place where an executor's
    unexpected exception is caught: it becomes a transient crash, retried."""
    if run.cancelled():
        return Outcome(OutcomeKind.INTERRUPTED, summary="interrupted", error="executor was cancelled")
    err = run.exception()
    if err is None:
        return run.result()
    log.error("executor crashed", exc_info=err)
    text = f"{type(err).__name__}: {err}"
    return Outcome(OutcomeKind.TRANSIENT, summary=f"executor crashed: {text}"[:200], error=f"executor crashed: {text}")


async def _cancel(run: asyncio.Task[Outcome], outcome: Outcome) -> Outcome:
    """Cancel the executor's task (it ends its process group) and wait for it.
    Returns ``outcome``, or the executor's own if it finished first."""
    run.cancel()
    await asyncio.wait({run})
    if run.cancelled():
        return outcome
    return _outcome_of(run)


async def _wait_event(event: asyncio.Event, timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout_s)


def _brief(outcome: Outcome) -> str:
    text = outcome.summary or outcome.error or ""
    return f": {text[:120]}" if text else ""
