"""The dispatcher: claim → run → record, one task at a time, until told to stop.

``Dispatcher.run_once()`` claims the most urgent due task, runs it through its
executor and records what became of it (docs/running.md). ``run_forever(stop)``
repeats that, and when nothing is due sleeps until the next task is due, until
``wake()`` is called (sensors in this process), or until another process commits to
the database (``PRAGMA data_version``, polled every ``poll_s``).

While a task runs, a heartbeat renews its lease every ``[dispatch] heartbeat`` and
honours a cancel request; the dispatcher's own state goes to ``loop_state``
(``dispatch.heartbeat``). What becomes of the task is decided by ``vigil.fate``
inside the transaction that records the attempt (``Store.record``): the loop only
says what happened.

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

from dispatch.attempt import AttemptPreparer, settled
from dispatch.executors import Executor, ProgressNoted, RunContext
from dispatch.guard import ClaimDecision, Guardrails
from dispatch.heartbeat import Heartbeat
from dispatch.meter import Unmetered
from dispatch.skills import Skill, load_skills
from dispatch.space import OutOfSpace, SpaceWait, out_of_space
from vigil.clock import Clock, real_seconds
from vigil.config import Settings
from vigil.errors import GitError, InputError, InvalidTransition, VigilError
from vigil.fate import Policy
from vigil.faults import crash_point
from vigil.models import Claim, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store import Store

log = logging.getLogger("vigil.dispatch")

ExecutorFactory = Callable[[str], Executor]
"""Returns the executor for a name from config or a skill (``claude``, ``dry-run`` …)."""

POLL_S = 0.15  # data_version probe interval while idle: a few µs per probe
STOP_POLL_S = 0.2  # how often a stopping dispatcher checks for a second signal
ERROR_PAUSE_S = 1.0  # after a failed step (database trouble), before trying again
REPEAT_ERROR_S = 60.0  # how seldom the same failed step is logged again
CANCELLED_EXECUTOR = Outcome(OutcomeKind.INTERRUPTED, summary="interrupted", error="executor was cancelled")


class Dispatcher:
    """Runs due tasks one at a time. Not thread-safe; one per process and lock.

    ``guard`` is asked before each claim (paused, gated, over budget) and before
    each run (a skill that requires approval, a deferral), and told each outcome.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        executor_factory: ExecutorFactory,
        clock: Clock,
        worker_id: str,
        *,
        guard: Guardrails,
        rng: random.Random | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        self._store = store
        self._settings = settings
        self._executors = executor_factory
        self._clock = clock
        self.worker_id = worker_id
        self._guard = guard
        self._policy = Policy(settings.dispatch, rng or random.Random())
        self._poll_s = poll_s
        self._wakeup = asyncio.Event()
        self._stop: asyncio.Event | None = None
        self._hurry = False
        self._stop_reason = "vigil was stopped"  # recorded on a task a stop interrupts
        self._heartbeat = Heartbeat(store, clock, worker_id)
        self._note_writes: set[asyncio.Future[None]] = set()  # heartbeats carrying a live note
        self._preparer = AttemptPreparer(store, settings, clock)
        self._restriction: ClaimDecision | None = None  # the guard's last "no" or "only urgent ones", while it lasts
        self._space = SpaceWait(settings.dispatch, clock)  # after runs that found the disk full

    # --- control -------------------------------------------------------------------
    def wake(self) -> None:
        """Look for due tasks now (a sensor in this process added some)."""
        self._wakeup.set()

    def hurry(self, reason: str | None = None) -> None:
        """Cut a stop's grace period short: end the running task now. ``reason``
        (None: "vigil was stopped") is what the stopped run records."""
        self._hurry = True
        if reason is not None:
            self._stop_reason = reason

    @property
    def claim_restriction(self) -> ClaimDecision | None:
        """The guard's last refusal to claim (paused, gated) or restriction (over
        budget: only tasks a person made urgent), while it lasts; else None. Its ``until`` is when
        the idle loop asks the guard again."""
        return self._restriction

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
            write = asyncio.ensure_future(self._heartbeat.beat("running", claim))
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
        return None if claim is None else await self._attempt(claim)

    async def _may_claim(self) -> ClaimDecision:
        """The guard's answer; logs when claiming stops or starts again. While a full
        disk keeps the loop waiting, that wait (announced when it began)."""
        waiting = self._space.decision(self._clock.now_ms())
        if waiting is not None:
            self._restriction = waiting
            return waiting
        decision = await self._guard.may_claim(self._clock.now_ms())
        if not decision.may_claim and self._restriction is None:
            log.warning("not claiming: %s", decision.reason)
        elif decision.may_claim and decision.max_priority is None and self._restriction is not None:
            log.info("claiming again")
        # Over budget the loop is held back only in part: kept, so that with only routine
        # tasks due the idle loop sleeps until the guard's recheck instead of spinning.
        restricted = not decision.may_claim or decision.max_priority is not None
        self._restriction = decision if restricted else None
        return decision

    async def _claim(self) -> Claim | None:
        decision = await self._may_claim()
        if not decision.may_claim:
            return None
        return await self._store.claim_next(
            worker=self.worker_id,
            lease_ms=self._settings.dispatch.lease_ms,
            executor=self._settings.dispatch.executor,
            max_priority=decision.max_priority,
            by_person=decision.by_person,
        )

    async def _attempt(self, claim: Claim) -> Task:
        """Run one claimed task and record it; returns the task as recorded. Its
        skills are read once, here: the guard and the run both use them."""
        task = claim.task
        try:
            skills = load_skills(self._settings.skills_dir, task.skills)
        except InputError as err:  # an unknown skill, a bad skill file: the task's fault
            return await self._record(claim, Outcome(OutcomeKind.FAILED, summary=str(err), error=str(err)))
        if self._guard.needs_approval(task, skills):
            held = await self._store.put_back(claim, worker=self.worker_id, until=None)
            log.info("task #%d waits for a person's approval (vigil task approve %d)", task.id, task.id)
            return held
        later = await self._guard.deferred(task, skills)
        if later is not None:
            deferred = await self._store.put_back(claim, worker=self.worker_id, until=later.until)
            log.info("task #%d waits: %s", task.id, later.why)
            return deferred
        log.info("task #%d started (attempt %d): %s", task.id, claim.attempt, task.subject)
        crash_point("after-claim")
        await self._heartbeat.beat("running", claim)
        return await self._record(claim, await self._prepare_and_run(claim, skills))

    async def _record(self, claim: Claim, outcome: Outcome) -> Task:
        """Record the attempt (its fate decided by the store, ``vigil.fate``), say what
        became of the task, and tell the guard what the store recorded."""
        recorded = await self._store.record(claim, outcome, worker=self.worker_id, policy=self._policy)
        task, outcome = recorded.task, recorded.outcome
        log.info("task #%d %s (%s)%s%s", task.id, task.status, outcome.kind, _denied(outcome), _brief(outcome))
        if task.status is TaskStatus.PENDING and task.claimed_by is None:
            wait_s = max(task.scheduled_for - self._clock.now_ms(), 0) / 1000
            counted = " (attempt not counted)" if recorded.attempt_given_back else ""
            log.info("task #%d: retry in %.0fs%s", task.id, wait_s, counted)
        elif task.status is TaskStatus.WAITING:
            log.info('task #%d waits for a person\'s answer (vigil task answer %d "…")', task.id, task.id)
        elif task.awaiting_review:
            log.info("task #%d waits for a person's review (vigil task approve/reject %d)", task.id, task.id)
        try:
            await self._guard.after_outcome(task, outcome)
        except VigilError as err:
            log.error("guard could not record task #%d's outcome: %s", task.id, err)
        return task

    async def _prepare_and_run(self, claim: Claim, skills: list[Skill]) -> Outcome:
        """Prepare the attempt and run it, the agent and then its code work (the
        checks run watched too: ``dispatch.worktree``); returns its outcome
        (``stopped`` for a stop or a full disk: not the task's doing)."""
        task = claim.task
        try:
            attempt = await self._preparer.prepare(claim, skills)
            ctx, work = attempt.ctx, attempt.work
            executor = self._executors(attempt.executor)
            if attempt.executor != self._settings.dispatch.executor:
                # The claim recorded the configured executor; a skill chose this one.
                await self._store.set_executor(claim, attempt.executor)
        except Unmetered as err:  # a cap that cannot be metered: the task's, or the daily budget's (gated)
            return Outcome(OutcomeKind.REFUSED if err.daily else OutcomeKind.FAILED, summary=str(err), error=str(err))
        except InputError as err:  # no such repository, no such base: the task's fault
            return Outcome(OutcomeKind.FAILED, summary=str(err), error=str(err))
        except (OSError, GitError) as err:  # logs/ not writable, disk full, git failed: retried
            if isinstance(err, OSError) and out_of_space(err):
                return self._out_of_space(err)
            text = f"could not prepare the run: {err}"
            log.error("task #%d: %s", task.id, text)
            return Outcome(OutcomeKind.TRANSIENT, summary=text, error=text)
        ctx = replace(ctx, on_progress=self._progress_writer(claim))

        async def watched(ctx: RunContext) -> Outcome:
            return await self._watch(asyncio.ensure_future(work.run(self._store, executor.run(task, ctx))), task, claim)

        try:
            outcome = await watched(ctx)
            if ctx.resume is not None and outcome.resume_refused:
                # an expired session, another account: the same attempt, afresh
                log.warning("task #%d: could not resume its session (%s); starting afresh", task.id, outcome.error)
                ctx = replace(ctx, resume=None, keep_transcript=True)
                outcome = await watched(ctx)
            elif ctx.resume is not None:
                outcome = replace(outcome, resumed_from=ctx.resume.from_run)
        except OutOfSpace as full:
            outcome = self._out_of_space(full.error)
        else:
            self._space.wrote()
        if self._note_writes:
            await asyncio.gather(*self._note_writes)  # so that none lands after the clear
        if self._heartbeat.note is not None:
            self._heartbeat.note = None  # the run is over: so is its note
            await self._heartbeat.beat("running", claim)
        outcome = await work.changes(outcome)  # a run cut short still leaves its changes
        await work.retire()  # what is left in the workspace is files, no repository of the agent's
        # secrets masked (the agent's or a check's output), what the stream carried kept, the account named
        return settled(outcome, ctx)

    def _out_of_space(self, err: OSError) -> Outcome:
        """The outcome of a run the full disk stopped: ``stopped``, like a stop's, so
        neither its attempt nor a failure counts (the loop waits for space)."""
        text = self._space.full(err)
        return Outcome(OutcomeKind.STOPPED, summary=text, error=text)

    async def _watch(self, run: asyncio.Task[Outcome], task: Task, claim: Claim) -> Outcome:
        """Wait for the executor's task ``run``, renewing the lease every heartbeat,
        ending it on a cancel request or when a stop's grace runs out. Returns the
        outcome and whether a stop interrupted it."""
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
                    stopped = Outcome(
                        OutcomeKind.STOPPED, summary=f"stopped: {self._stop_reason}", error="dispatcher stopped"
                    )
                    return await _cancel(run, stopped)
                if now >= next_beat:
                    next_beat = now + heartbeat_s
                    cancel = await self._renew(claim)
                    if cancel is not None:
                        return await _cancel(run, cancel)
            return _outcome_of(run)
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
        await self._heartbeat.beat("running", claim)
        if cancel_requested:
            log.info("task #%d: cancel requested; ending the run", claim.task.id)
            return Outcome(OutcomeKind.CANCELED, summary="canceled while running", error="cancel requested")
        return None

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
        said, said_at = "", 0.0
        try:
            while not stop.is_set():
                # Cleared before looking, so a wake-up during the claim is not lost.
                self._wakeup.clear()
                try:
                    claim = await self._claim()
                    if claim is None:
                        await self._heartbeat.beat("idle")
                        await self._idle(stop)
                        continue
                    await self._attempt(claim)
                except VigilError as err:
                    # the same failure every second (a full disk) is said once a minute
                    if str(err) != said or time.monotonic() - said_at >= REPEAT_ERROR_S:
                        log.error("dispatch step failed: %s", err)
                        said, said_at = str(err), time.monotonic()
                    await _wait_event(stop, ERROR_PAUSE_S)
        finally:
            if mark_stopped:
                await self.mark_stopped()

    async def _idle(self, stop: asyncio.Event) -> None:
        """Sleep until a task may be claimable: the next due time (or, while the guard
        holds the loop back, the time it lets go by itself), a wake-up, a commit by
        another process (a new task, a person resuming the loop), or ``stop``.
        Returns after at least one probe, so nothing can make the loop spin."""
        held = self._restriction
        wake_at = held.until if held is not None else await self._store.next_due_at()
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
                    await self._heartbeat.beat("idle")
        finally:
            for waiter in waiters:
                waiter.cancel()


def _outcome_of(run: asyncio.Task[Outcome]) -> Outcome:
    """The finished executor task's outcome. The one place where an executor's
    unexpected exception is caught: it becomes a transient crash, retried; but a
    disk found full is the machine's problem (raises ``OutOfSpace``)."""
    if run.cancelled():
        return CANCELLED_EXECUTOR
    err = run.exception()
    if isinstance(err, OSError) and out_of_space(err):
        raise OutOfSpace(err)
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
