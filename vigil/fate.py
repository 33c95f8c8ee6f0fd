"""What becomes of a task: one policy for every way a claimed task is let go.

The dispatcher after an attempt, crash recovery after a dead dispatcher's, the agent
asking for a later try, a task put back before it ran: each is decided here, by a
pure function of the task as it is *inside the transaction that writes the result*
(so a cancel requested a moment before is seen), the outcome, the settings and the
time. The store only writes the ``Fate`` (``SQL_SETTLE``), guarded by the claimant.

======================================================  =========================  ==========  ====================
what happened                                           the task becomes           its attempt due
======================================================  =========================  ==========  ====================
a person asked to cancel it meanwhile (any row below)   canceled                   as below    —
success                                                 completed                  counted     —
success with actions refused to the agent, and          blocked, awaiting review   counted     —
``[dispatch] on_denial = "review"``; or of a task
whose result a person reviews (``Outcome.review``)
failed, budget, turns, context, over_budget (Vigil      failed                     counted     —
ended it: it would have passed its task's
``max_cost_usd`` or the daily budget)
canceled (a cancel request ended the run)               canceled                   counted     —
auth, refused (every task would meet it: the guard      pending                    given back  now
gates the loop until a person resumes it)
usage limited (the limit stops the account, not the     pending                    given back  now
task: another free account or a fallback executor
runs it; else the guard gates the loop until the
earliest reset)
transient, stalled, timeout, interrupted (its           pending                    counted     after a backoff
dispatcher died or lost the claim), sandbox_failed (the
CLI's sandbox could not start the agent's commands:
whatever the agent said, its work was not done)
checks failed (the agent was done, a check was not;     pending                    counted     now
the next prompt shows the check's output)
… with no attempt left (``attempt_count`` past          failed, "gave up after N   counted     —
``max_retries``)                                        attempts: …"
stopped (``vigil run`` was stopped)                     pending                    given back  now
asked (the agent asked a person a question during the   waiting, for the answer    given back  when answered
run, and did not close its task)                        (``vigil task answer``)                (at once)
the agent asked for another try (its ``close`` with     pending                    counted     when it asked
``pending``)
… with no attempt left                                  failed, "gave up …"        counted     —
put back unrun: a skill needs a person's approval       blocked, awaiting          given back  —
                                                        approval
put back unrun: its sensor is over its daily budget     pending                    given back  when asked
======================================================  =========================  ==========  ====================

A task its agent closed itself during the run (completed, failed, blocked, or
pending at its own request) keeps that status: the store sees it is no longer
active and only records the run. One exception: a close as completed in a run
recorded ``sandbox_failed`` is void (the agent's commands never ran), and the task
is settled by the table like any attempt that failed so. An interrupted run backs off like a transient
failure, on purpose: a task that keeps killing its dispatcher (or the machine)
must not come back at once, and it fails once its attempts run out. A stop by the
operator is not the task's doing: its attempt is given back and it is due at once.

A run is recorded as *asked* (``recorded_as``) when its agent asked a question
during it (the task's ``asked_run`` is that run), whatever else its CLI reported,
unless a person's cancel ended it. Its attempt is given back on purpose: asking
is not failing, and the attempt after the answer continues the same work (usually
in the same agent session), so a task that asks, is answered and then completes
has used one attempt. A person answers each question, so asking cannot loop on
its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from vigil.config import DispatchSettings
from vigil.models import Outcome, OutcomeKind, Task, TaskStatus

GIVEN_BACK = frozenset({OutcomeKind.AUTH, OutcomeKind.REFUSED, OutcomeKind.USAGE_LIMITED, OutcomeKind.STOPPED})
RETRYABLE = frozenset(
    {
        OutcomeKind.TRANSIENT,
        OutcomeKind.STALLED,
        OutcomeKind.TIMEOUT,
        OutcomeKind.INTERRUPTED,
        OutcomeKind.SANDBOX_FAILED,
    }
)
FINAL = {
    OutcomeKind.SUCCESS: TaskStatus.COMPLETED,
    OutcomeKind.CANCELED: TaskStatus.CANCELED,
    OutcomeKind.FAILED: TaskStatus.FAILED,
    OutcomeKind.BUDGET: TaskStatus.FAILED,
    OutcomeKind.TURNS: TaskStatus.FAILED,
    OutcomeKind.CONTEXT: TaskStatus.FAILED,
    OutcomeKind.OVER_BUDGET: TaskStatus.FAILED,
}
NOT_ASKED = frozenset({OutcomeKind.CANCELED})  # a person's cancel wins over a question


@dataclass(frozen=True, slots=True)
class Fate:
    """What to write. ``retry_at`` (epoch ms) is when a pending task is due (None:
    unchanged); ``count_attempt`` False gives the attempt back; ``summary`` None
    keeps the task's; ``review`` / ``approval`` set that state to ``pending``."""

    status: TaskStatus
    retry_at: int | None = None
    count_attempt: bool = True
    summary: str | None = None
    review: bool = False
    approval: bool = False


@dataclass(frozen=True)
class Recorded:
    """What recording an attempt came to (``Store.record``): ``task`` as it now is;
    ``outcome`` as recorded (``asked`` when its agent asked a person: ``recorded_as``);
    ``fate`` the fate written, None when none was (its agent had closed the task, or
    the run was recorded already)."""

    task: Task
    outcome: Outcome
    fate: Fate | None

    @property
    def attempt_given_back(self) -> bool:
        return self.fate is not None and not self.fate.count_attempt


@dataclass(frozen=True)
class Policy:
    """The settings a fate depends on, and the random source of the backoff's jitter."""

    settings: DispatchSettings = field(default_factory=DispatchSettings)
    rng: random.Random = field(default_factory=random.Random)

    def backoff_ms(self, retry_number: int) -> int:
        """Delay before retry ``retry_number`` (1 for the first retry), in ms:
        ``retry_backoff × 2^(n-1)`` capped at ``retry_backoff_max``, then "equal
        jitter" (uniform in [half, all] of that), so tasks that failed together spread
        out but never come back much sooner than the policy says."""
        exponent = min(max(retry_number - 1, 0), 32)  # 2^32 × any sane base is past any cap
        ceiling: int = min(self.settings.retry_backoff_max_ms, self.settings.retry_backoff_ms * (1 << exponent))
        return ceiling // 2 + int(self.rng.random() * (ceiling - ceiling // 2))


def attempts_left(task: Task) -> bool:
    """Whether ``task`` (as claimed: its current attempt counted) may run again."""
    return task.attempt_count <= task.max_retries


def gave_up(attempts: int, reason: str) -> str:
    """The summary of a task failed because its attempts ran out."""
    return f"gave up after {attempts} attempt{'' if attempts == 1 else 's'}: {reason}"


def recorded_as(task: Task, run_id: int, outcome: Outcome) -> Outcome:
    """``outcome`` as run ``run_id`` of ``task`` (read in the recording
    transaction) is recorded: ``asked`` when its agent asked a question during the
    run and the task is still active (not closed by its agent), unless a cancel
    ended the run; else unchanged."""
    asked = task.asked_run == run_id and task.answer is None and task.status is TaskStatus.ACTIVE
    if not asked or outcome.kind in NOT_ASKED or outcome.kind is OutcomeKind.ASKED:
        return outcome
    return replace(outcome, kind=OutcomeKind.ASKED, summary=f"asked: {task.question}"[:200])


def after_attempt(task: Task, outcome: Outcome, policy: Policy, now_ms: int) -> Fate:
    """The fate of active ``task`` (as it is now, its current attempt counted) after
    an attempt that ended with ``outcome``."""
    kind = outcome.kind
    summary = outcome.summary or None
    if kind is OutcomeKind.ASKED:
        fate = Fate(TaskStatus.WAITING, count_attempt=False, summary=summary)
    elif kind in GIVEN_BACK:
        fate = Fate(TaskStatus.PENDING, retry_at=now_ms, count_attempt=False, summary=summary)
    elif kind in RETRYABLE:
        if attempts_left(task):
            fate = Fate(TaskStatus.PENDING, retry_at=now_ms + policy.backoff_ms(task.attempt_count), summary=summary)
        else:
            reason = outcome.summary or outcome.error or str(kind)
            fate = Fate(TaskStatus.FAILED, summary=gave_up(task.attempt_count, reason))
    elif kind is OutcomeKind.CHECKS_FAILED:  # the agent fixes it now: no backoff
        if attempts_left(task):
            fate = Fate(TaskStatus.PENDING, retry_at=now_ms, summary=summary)
        else:
            fate = Fate(TaskStatus.FAILED, summary=gave_up(task.attempt_count, outcome.summary or str(kind)))
    elif kind is OutcomeKind.SUCCESS and (outcome.review or _denials_reviewed(outcome, policy)):
        fate = Fate(TaskStatus.BLOCKED, summary=summary, review=True)
    else:
        fate = Fate(FINAL[kind], summary=summary)
    return _cancel_wins(task, fate)


def after_request(task: Task, retry_at: int, summary: str) -> Fate:
    """The fate of running ``task`` whose agent asked for another try at
    ``retry_at`` (epoch ms): pending then, or failed once its attempts ran out."""
    if not attempts_left(task):
        return Fate(TaskStatus.FAILED, summary=gave_up(task.attempt_count, summary))
    return Fate(TaskStatus.PENDING, retry_at=retry_at, summary=summary)


def put_back(task: Task, *, until: int | None) -> Fate:
    """The fate of claimed ``task`` put back before it ran, its attempt given back:
    due again at ``until`` (epoch ms), or with ``until`` None waiting, blocked, for a
    person's approval."""
    if until is None:
        fate = Fate(TaskStatus.BLOCKED, count_attempt=False, approval=True)
    else:
        fate = Fate(TaskStatus.PENDING, retry_at=until, count_attempt=False)
    return _cancel_wins(task, fate)


def _denials_reviewed(outcome: Outcome, policy: Policy) -> bool:
    """Whether a success with refused actions waits for a person's review."""
    return bool(outcome.permission_denials) and policy.settings.on_denial == "review"


def _cancel_wins(task: Task, fate: Fate) -> Fate:
    """A person's cancel request wins over putting the task back in the queue (the
    next claim would clear the request) and over holding it."""
    if not task.cancel_requested or fate.status in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED):
        return fate
    return Fate(TaskStatus.CANCELED, count_attempt=fate.count_attempt, summary=fate.summary)
