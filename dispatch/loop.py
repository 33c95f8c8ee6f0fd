"""The dispatcher: claim → run → record, one task at a time, until told to stop.

``Dispatcher.run_once()`` claims the most urgent due task, runs it through its
executor and records what became of it (docs/running.md). ``run_forever(stop)``
repeats that, and when nothing is due sleeps until the next task is due, until
``wake()`` is called (sensors in this process), or until another process commits to
the database (``PRAGMA data_version``, polled every ``poll_s``).

While a task runs, a heartbeat renews its lease every ``[dispatch] heartbeat`` and
honours a cancel request; the dispatcher's own state goes to ``loop_state``
(``dispatch.heartbeat``). When tasks are due back to back, the finish of one and the
claim of the next share one transaction (``Store.finish_and_claim``).

Only the truly unexpected exception from an executor is caught, in ``_outcome_of``,
and recorded as a transient crash (``_crash``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import replace

from dispatch.attempt import AttemptPreparer
from dispatch.executors import Executor, ProgressNoted, RunContext
from dispatch.guard import GateDecision, Guard
from dispatch.heartbeat import Heartbeat
from dispatch.retry import RETRYABLE, Requeue, Review, decide, gave_up
from vigil.clock import Clock, real_seconds
from vigil.config import Settings
from vigil.errors import InputError, InvalidTransition, VigilError
from vigil.faults import crash_point
from vigil.models import Claim, Outcome, OutcomeKind, Task
from vigil.store import Store

log = logging.getLogger("vigil.dispatch")

ExecutorFactory = Callable[[str], Executor]
"""Returns the executor for a name from config or a skill (``claude``, ``dry-run`` …)."""

POLL_S = 0.15  # data_version probe interval while idle: a few µs per probe
STOP_POLL_S = 0.2  # how often a stopping dispatcher checks for a second signal
ERROR_PAUSE_S = 1.0  # after a failed step (database trouble), before trying again
CANCELLED_EXECUTOR = Outcome(OutcomeKind.INTERRUPTED, summary="interrupted", error="executor was cancelled")


class Dispatcher:
    """Runs due tasks one at a time. Not thread-safe; one per process and lock.

    ``guard`` (optional) is asked before each claim (paused, gated, over budget) and
    told each outcome; a task whose skill requires approval is held for a person.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        executor_factory: ExecutorFactory,
        clock: Clock,
        worker_id: str,
        *,
        guard: Guard | None = None,
        rng: random.Random | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        self._store = store
        self._settings = settings
        self._executors = executor_factory
        self._clock = clock
        self.worker_id = worker_id
        self._guard = guard
        self._rng = rng or random.Random()
        self._poll_s = poll_s
        self._wakeup = asyncio.Event()
        self._stop: asyncio.Event | None = None
        self._hurry = False
        self._stop_reason = "vigil was stopped"  # recorded on a task a stop interrupts
        self._heartbeat = Heartbeat(store, clock, worker_id)
        self._note_writes: set[asyncio.Future[None]] = set()  # heartbeats carrying a live note
        self._preparer = AttemptPreparer(store, settings)
        self._closed_gate: GateDecision | None = None  # the guard's last "no", while it lasts

    # --- control -------------------------------------------------------------------
    def wake(self) -> None:
        """Look for due tasks now (a sensor in this process added some)."""
        self._wakeup.set()

    def hurry(self, reason: str | None = None) -> None:
        """Cut a stop's grace period short: end the running task now. ``reason``
        (None: "vigil was stopped") is what the interrupted run records."""
        self._hurry = True
        if reason is not None:
            self._stop_reason = reason

    @property
    def closed_gate(self) -> GateDecision | None:
        """The guard's last refusal to claim (paused, gated) or restriction (over
        budget: urgent tasks only), while it lasts; else None. Its ``until`` is when
        the idle loop asks the guard again."""
        return self._closed_gate

    async def mark_stopped(self) -> None:
        """Write the ``stopped`` heartbeat (a clean exit, not a death)."""
        await self._heartbeat.beat("stopped")

    # --- the step ------------------------------------------------------------------
    def _progress_writer(self, claim: Claim) -> ProgressNoted:
        """The run's ``on_progress``: the note goes into the heartbeat, written at
        once (in the background: the executor's line reader must not wait on the
        database), where ``vigil status`` and the TUI show it."""

        def on_progress(note: str | None) -> None:
            if note == self._heartbeat.note:
                return
            self._heartbeat.note = note
            write = asyncio.ensure_future(self._heartbeat.beat("running", claim, periodic=True))
            self._note_writes.add(write)
            write.add_done_callback(self._note_writes.discard)

        return on_progress

    async def run_once(self, stop: asyncio.Event | None = None) -> Task | None:
        """Claim the most urgent due task, run it, record it. Returns the task as
        recorded (finished, requeued or held for approval), or None when nothing was
        due or the guard closed the loop. ``stop`` set while the task runs starts the
        graceful stop (docs/running.md)."""
        if stop is not None:
            self._stop = stop
        claim = await self._claim()
        if claim is None:
            return None
        task, _ = await self._attempt(claim, chain=False)
        return task

    async def _gate(self) -> GateDecision | None:
        """The guard's answer (None without a guard); logs when the gate closes or opens."""
        if self._guard is None:
            return None
        decision = await self._guard.may_claim(self._clock.now_ms())
        if not decision.may_claim and self._closed_gate is None:
            log.warning("not claiming: %s", decision.reason)
        elif decision.may_claim and decision.max_priority is None and self._closed_gate is not None:
            log.info("claiming again")
        # Over budget the gate is half open: kept, so that with only routine tasks due
        # the idle loop sleeps until the guard's recheck instead of spinning on them.
        restricted = not decision.may_claim or decision.max_priority is not None
        self._closed_gate = decision if restricted else None
        return decision

    async def _claim(self) -> Claim | None:
        gate = await self._gate()
        if gate is not None and not gate.may_claim:
            return None
        return await self._store.claim_next(
            worker=self.worker_id,
            lease_ms=self._settings.dispatch.lease_ms,
            executor=self._settings.dispatch.executor,
            max_priority=None if gate is None else gate.max_priority,
        )

    async def _attempt(self, claim: Claim, *, chain: bool) -> tuple[Task, Claim | None]:
        """Run one claimed task and record it. With ``chain``, a successful finish
        also claims the next due task in the same transaction; it is returned."""
        task = claim.task
        if self._guard is not None and self._guard.needs_approval(task):
            held = await self._store.hold_for_approval(claim, worker=self.worker_id)
            log.info("task #%d waits for a person's approval (vigil task approve %d)", task.id, task.id)
            return held, None
        later = None if self._guard is None else await self._guard.deferred_until(task)
        if later is not None:
            deferred = await self._store.release_unrun(claim, worker=self.worker_id, retry_at=later)
            log.info("task #%d waits: its sensor is over its daily budget", task.id)
            return deferred, None
        log.info("task #%d started (attempt %d): %s", task.id, claim.attempt, task.subject)
        crash_point("after-claim")
        await self._heartbeat.beat("running", claim)
        try:
            executor_name, ctx = await self._preparer.prepare(claim)
            executor = self._executors(executor_name)
            if executor_name != self._settings.dispatch.executor:
                # The claim recorded the configured executor; a skill chose this one.
                await self._store.set_executor(claim, executor_name)
        except InputError as err:  # an unknown skill, a bad skill file: the task's fault
            outcome, stopped = Outcome(OutcomeKind.FAILED, summary=str(err), error=str(err)), False
        except OSError as err:  # logs/ not writable, disk full: the machine's fault, retried
            text = f"could not prepare the run: {err}"
            log.error("task #%d: %s", task.id, text)
            outcome, stopped = Outcome(OutcomeKind.TRANSIENT, summary=text, error=text), False
        else:
            ctx = replace(ctx, on_progress=self._progress_writer(claim))
            outcome, stopped = await self._run(executor, task, ctx, claim)
            if self._note_writes:
                await asyncio.gather(*self._note_writes)  # so that none lands after the clear
            if self._heartbeat.note is not None:
                self._heartbeat.note = None  # the run is over: so is its note
                await self._heartbeat.beat("running", claim, periodic=True)
            # what the agent printed may hold a secret it was given
            outcome = ctx.redactor.outcome(outcome)
        recorded, next_claim = await self._record(claim, outcome, stopped=stopped, chain=chain)
        log.info("task #%d %s (%s)%s%s", recorded.id, recorded.status, outcome.kind, _denied(outcome), _brief(outcome))
        if self._guard is not None:
            try:
                await self._guard.after_outcome(recorded, outcome)
            except VigilError as err:
                log.error("guard could not record task #%d's outcome: %s", recorded.id, err)
        return recorded, next_claim

    async def _run(self, executor: Executor, task: Task, ctx: RunContext, claim: Claim) -> tuple[Outcome, bool]:
        """Run the executor as its own asyncio task and watch over it: heartbeat,
        cancel requests, graceful stop. Returns the outcome and whether a stop
        interrupted it."""
        return await self._watch(asyncio.ensure_future(executor.run(task, ctx)), task, claim)

    async def _watch(self, run: asyncio.Task[Outcome], task: Task, claim: Claim) -> tuple[Outcome, bool]:
        """Wait for the executor's task ``run``, renewing the lease every heartbeat,
        ending it on a cancel request or when a stop's grace runs out."""
        # The heartbeat renews a lease kept in clock time, so it beats in clock time
        # too; the stop's grace is about a real process and stays real.
        heartbeat_s = real_seconds(self._clock, self._settings.dispatch.heartbeat_ms)
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
                        OutcomeKind.INTERRUPTED, summary=f"interrupted: {self._stop_reason}", error="dispatcher stopped"
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
        await self._heartbeat.beat("running", claim, periodic=True)
        if cancel_requested:
            log.info("task #%d: cancel requested; ending the run", claim.task.id)
            return Outcome(OutcomeKind.CANCELED, summary="canceled while running", error="cancel requested")
        return None

    async def _record(self, claim: Claim, outcome: Outcome, *, stopped: bool, chain: bool) -> tuple[Task, Claim | None]:
        """Finish or requeue the task according to the retry policy; with ``chain``,
        a success's finish also claims the next task (one commit for both)."""
        now = self._clock.now_ms()
        worker = self.worker_id
        if stopped:
            # The operator stopped the service: not the task's failure, so the attempt
            # is given back; the run stays recorded as interrupted.
            return await self._store.requeue(claim, outcome, retry_at=now, count_attempt=False, worker=worker), None
        decision = decide(claim.task, outcome, self._settings.dispatch, now, self._rng)
        if isinstance(decision, Requeue):
            log.info(
                "task #%d: retry in %.0fs%s",
                claim.task.id,
                (decision.retry_at - now) / 1000,
                "" if decision.count_attempt else " (attempt not counted)",
            )
            task = await self._store.requeue(
                claim, outcome, retry_at=decision.retry_at, count_attempt=decision.count_attempt, worker=worker
            )
            return task, None
        if isinstance(decision, Review):
            held = await self._store.hold_for_review(claim, outcome, worker=worker)
            if held.awaiting_review:
                log.info("task #%d waits for a person's review (vigil task approve/reject %d)", held.id, held.id)
            return held, None
        if outcome.kind in RETRYABLE:
            reason = outcome.summary or outcome.error or str(outcome.kind)
            outcome = replace(outcome, summary=gave_up(claim.task.attempt_count, reason))
        # Chain only after a success: any other outcome may make the guard close the
        # gate, and the next task must not be claimed past a closed gate.
        gate: GateDecision | None = None
        if chain and outcome.kind is OutcomeKind.SUCCESS and not (self._stop is not None and self._stop.is_set()):
            gate = await self._gate() or GateDecision(True)
        if gate is None or not gate.may_claim:
            return await self._store.finish(claim, outcome, decision.status, worker=worker), None
        return await self._store.finish_and_claim(
            claim,
            outcome,
            decision.status,
            worker=worker,
            lease_ms=self._settings.dispatch.lease_ms,
            executor=self._settings.dispatch.executor,
            max_priority=gate.max_priority,
        )

    async def _give_back(self, claim: Claim) -> None:
        """Requeue a chained claim that a stop overtook before it ran (attempt not counted)."""
        outcome = Outcome(
            OutcomeKind.INTERRUPTED, summary="not started: vigil was stopping", error="dispatcher stopped"
        )
        await self._store.requeue(
            claim, outcome, retry_at=self._clock.now_ms(), count_attempt=False, worker=self.worker_id
        )

    # --- forever -------------------------------------------------------------------
    async def run_forever(self, stop: asyncio.Event, *, mark_stopped: bool = True) -> None:
        """Run due tasks until ``stop`` is set; then write the ``stopped`` heartbeat
        (``mark_stopped`` False leaves that to the caller: with several lanes, only
        the last dispatcher to stop may say the loop stopped).

        A step that fails on the database is logged and tried again after a pause:
        a 24/7 loop must outlive a locked or briefly unavailable file (a task left
        active by such a failure is recovered when the dispatcher next starts).
        """
        self._stop = stop
        await self._heartbeat.beat("idle")
        claim: Claim | None = None
        try:
            while not stop.is_set():
                # Cleared before looking, so a wake-up during the claim is not lost.
                self._wakeup.clear()
                try:
                    if claim is None:
                        claim = await self._claim()
                    if claim is None:
                        await self._heartbeat.beat("idle")
                        await self._idle(stop)
                        continue
                    current, claim = claim, None
                    _, claim = await self._attempt(current, chain=True)
                except VigilError as err:
                    log.error("dispatch step failed: %s", err)
                    await _wait_event(stop, ERROR_PAUSE_S)
            if claim is not None:
                await self._give_back(claim)
        finally:
            if mark_stopped:
                await self.mark_stopped()

    async def _idle(self, stop: asyncio.Event) -> None:
        """Sleep until a task may be claimable: the next due time (or, while the guard
        keeps the gate closed, the time it opens by itself), a wake-up, a commit by
        another process (a new task, a person resuming the loop), or ``stop``.
        Returns after at least one probe, so nothing can make the loop spin."""
        gate = self._closed_gate
        wake_at = gate.until if gate is not None else await self._store.next_due_at()
        version = await self._store.data_version()
        heartbeat_s = real_seconds(self._clock, self._settings.dispatch.heartbeat_ms)
        next_beat = time.monotonic() + heartbeat_s
        waiters = [asyncio.ensure_future(self._wakeup.wait()), asyncio.ensure_future(stop.wait())]
        try:
            while True:
                timeout = self._poll_s
                if wake_at is not None:
                    timeout = min(timeout, max(real_seconds(self._clock, wake_at - self._clock.now_ms()), 0.001))
                done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                if done or await self._store.data_version() != version:
                    return
                if wake_at is not None and self._clock.now_ms() >= wake_at:
                    return
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + heartbeat_s
                    await self._heartbeat.beat("idle", periodic=True)
        finally:
            for waiter in waiters:
                waiter.cancel()


def _outcome_of(run: asyncio.Task[Outcome]) -> Outcome:
    """The finished executor task's outcome. The one place where an executor's
    unexpected exception is caught: it becomes a transient crash, retried."""
    if run.cancelled():
        return CANCELLED_EXECUTOR
    err = run.exception()
    return run.result() if err is None else _crash(err)


def _crash(err: BaseException) -> Outcome:
    """The outcome of an executor's unexpected exception: a transient crash, retried."""
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


def _denied(outcome: Outcome) -> str:
    """``, 2 actions denied: Write: …`` for the log line; empty when none was."""
    denials = outcome.permission_denials
    if not denials:
        return ""
    return f", {len(denials)} action{'' if len(denials) == 1 else 's'} denied: {denials[0][:120]}"


def _brief(outcome: Outcome) -> str:
    text = outcome.summary or outcome.error or ""
    return f": {text[:120]}" if text else ""
