"""What becomes of a task after an attempt: finish it, or requeue it for later.

The policy (docs/running.md, *Retries*):

* ``success`` → completed; but a success with refused actions (``permission_denials``)
  is held for a person's review unless ``[dispatch] on_denial = "complete"`` (the
  agent's own close, if it closed the task, still stands: the store keeps it);
* ``canceled`` → canceled;
* ``failed``, ``budget``, ``turns``, ``context`` → failed: a retry would spend
  money on the same result, a person should look;
* ``auth``, ``refused`` → given back (pending, due now, the attempt not counted):
  the credentials or the CLI's set-up are at fault, not the task; the guard gates
  the loop until a person has fixed them and resumed it;
* ``transient``, ``timeout``, ``interrupted`` → requeued after an exponential
  backoff with jitter while attempts remain (``attempt_count ≤ max_retries``), else
  failed;
* ``usage_limited`` → requeued at the provider's reset time (or after the configured
  fallback) with the attempt given back.

Pure functions of the outcome, the task, the settings, a time and a random source,
so they are tested without sleeping.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from vigil.config import DispatchSettings
from vigil.models import Outcome, OutcomeKind, Task, TaskStatus

GIVEN_BACK = frozenset({OutcomeKind.AUTH, OutcomeKind.REFUSED})
RETRYABLE = frozenset({OutcomeKind.TRANSIENT, OutcomeKind.TIMEOUT, OutcomeKind.INTERRUPTED})
FINAL = {
    OutcomeKind.SUCCESS: TaskStatus.COMPLETED,
    OutcomeKind.CANCELED: TaskStatus.CANCELED,
    OutcomeKind.FAILED: TaskStatus.FAILED,
    OutcomeKind.BUDGET: TaskStatus.FAILED,
    OutcomeKind.TURNS: TaskStatus.FAILED,
    OutcomeKind.CONTEXT: TaskStatus.FAILED,
}


@dataclass(frozen=True, slots=True)
class Finish:
    """Close the task with ``status``."""

    status: TaskStatus


@dataclass(frozen=True, slots=True)
class Requeue:
    """Put the task back to pending, due at ``retry_at`` (epoch ms).

    ``count_attempt`` False gives the attempt back (usage limits, operator stops).
    """

    retry_at: int
    count_attempt: bool


@dataclass(frozen=True, slots=True)
class Review:
    """Hold the task for a person's review (``Store.hold_for_review``)."""


Decision = Finish | Requeue | Review


def backoff_ms(retry_number: int, settings: DispatchSettings, rng: random.Random) -> int:
    """Delay before retry ``retry_number`` (1 for the first retry), in ms.

    ``retry_backoff × 2^(n-1)`` capped at ``retry_backoff_max``, then "equal jitter":
    drawn uniformly from [half, all] of that value, so tasks that failed together
    spread out but never come back much sooner than the policy says.
    """
    exponent = min(max(retry_number - 1, 0), 32)  # 2^32 × any sane base is past any cap
    ceiling: int = min(settings.retry_backoff_max_ms, settings.retry_backoff_ms * (1 << exponent))
    return ceiling // 2 + int(rng.random() * (ceiling - ceiling // 2))


def attempts_left(task: Task) -> bool:
    """Whether ``task`` (as claimed, its current attempt counted) may run again."""
    return task.attempt_count <= task.max_retries


def gave_up(attempts: int, reason: str) -> str:
    """The summary of a task failed because its attempts ran out."""
    return f"gave up after {attempts} attempt{'' if attempts == 1 else 's'}: {reason}"


def decide(task: Task, outcome: Outcome, settings: DispatchSettings, now_ms: int, rng: random.Random) -> Decision:
    """What to do with ``task`` after ``outcome``. ``task`` is the claimed row, so
    ``attempt_count`` already includes this attempt."""
    if outcome.kind is OutcomeKind.USAGE_LIMITED:
        retry_at = outcome.retry_at if outcome.retry_at is not None else now_ms + settings.usage_limit_fallback_ms
        return Requeue(retry_at=max(retry_at, now_ms), count_attempt=False)
    if outcome.kind in GIVEN_BACK:
        return Requeue(retry_at=now_ms, count_attempt=False)
    if outcome.kind in RETRYABLE:
        if not attempts_left(task):
            return Finish(TaskStatus.FAILED)
        return Requeue(retry_at=now_ms + backoff_ms(task.attempt_count, settings, rng), count_attempt=True)
    if outcome.kind is OutcomeKind.SUCCESS and outcome.permission_denials and settings.on_denial == "review":
        return Review()
    return Finish(FINAL[outcome.kind])
