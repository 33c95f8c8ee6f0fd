"""The retry policy: which outcomes retry, the backoff, usage limits."""

from __future__ import annotations

import random

import pytest

from dispatch.retry import Finish, Requeue, Review, backoff_ms, decide
from vigil.config import DispatchSettings
from vigil.models import DedupScope, Outcome, OutcomeKind, Task, TaskStatus

NOW = 1_767_225_600_000
SETTINGS = DispatchSettings(retry_backoff_ms=10_000, retry_backoff_max_ms=60_000, usage_limit_fallback_ms=3_600_000)


class FixedRandom(random.Random):
    """A random source that always draws ``value``."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


def task(attempt_count: int, max_retries: int = 3) -> Task:
    return Task(
        id=1, subject="s", description="", skills=(), priority=5, status=TaskStatus.ACTIVE, source="human",
        source_key=None, dedup=DedupScope.OPEN, parent_id=None, scheduled_for=NOW, created_at=NOW, updated_at=NOW,
        started_at=NOW, completed_at=None, attempt_count=attempt_count, max_retries=max_retries, cost_usd=0.0,
        api_cost_usd=0.0, tokens_in=0, tokens_out=0, result_summary=None, result_detail=None, model=None,
        executor=None, claimed_by="w", lease_until=None, cancel_requested=False, waiting_on=0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("retry_number", "low", "high"),
    [(1, 5_000, 10_000), (2, 10_000, 20_000), (3, 20_000, 40_000), (4, 30_000, 60_000), (40, 30_000, 60_000)],
)
def test_backoff_doubles_with_equal_jitter_and_a_cap(retry_number: int, low: int, high: int) -> None:
    assert backoff_ms(retry_number, SETTINGS, FixedRandom(0.0)) == low
    assert backoff_ms(retry_number, SETTINGS, FixedRandom(0.999999)) == high - 1
    drawn = {backoff_ms(retry_number, SETTINGS, random.Random(seed)) for seed in range(50)}
    assert all(low <= d < high for d in drawn)
    assert len(drawn) > 10  # jitter spreads retries out


@pytest.mark.parametrize("kind", [OutcomeKind.TRANSIENT, OutcomeKind.TIMEOUT, OutcomeKind.INTERRUPTED])
def test_retryable_outcomes_are_requeued_after_the_backoff(kind: OutcomeKind) -> None:
    decision = decide(task(attempt_count=2), Outcome(kind), SETTINGS, NOW, FixedRandom(0.0))

    assert decision == Requeue(retry_at=NOW + 10_000, count_attempt=True)


@pytest.mark.parametrize("kind", [OutcomeKind.TRANSIENT, OutcomeKind.TIMEOUT, OutcomeKind.INTERRUPTED])
def test_retryable_outcomes_fail_when_attempts_are_exhausted(kind: OutcomeKind) -> None:
    assert decide(task(attempt_count=4, max_retries=3), Outcome(kind), SETTINGS, NOW, FixedRandom(0.0)) == Finish(
        TaskStatus.FAILED
    )
    assert decide(task(attempt_count=1, max_retries=0), Outcome(kind), SETTINGS, NOW, FixedRandom(0.0)) == Finish(
        TaskStatus.FAILED
    )


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        (OutcomeKind.SUCCESS, TaskStatus.COMPLETED),
        (OutcomeKind.CANCELED, TaskStatus.CANCELED),
        (OutcomeKind.FAILED, TaskStatus.FAILED),
        (OutcomeKind.BUDGET, TaskStatus.FAILED),
        (OutcomeKind.TURNS, TaskStatus.FAILED),
        (OutcomeKind.CONTEXT, TaskStatus.FAILED),
    ],
)
def test_final_outcomes_never_retry(kind: OutcomeKind, status: TaskStatus) -> None:
    assert decide(task(attempt_count=1), Outcome(kind), SETTINGS, NOW, FixedRandom(0.0)) == Finish(status)


@pytest.mark.parametrize("kind", [OutcomeKind.AUTH, OutcomeKind.REFUSED])
def test_auth_and_refused_give_the_task_back_now_without_counting(kind: OutcomeKind) -> None:
    # even on the last allowed attempt: the credentials or the set-up are at fault
    assert decide(task(attempt_count=4, max_retries=3), Outcome(kind), SETTINGS, NOW, FixedRandom(0.0)) == Requeue(
        retry_at=NOW, count_attempt=False
    )


def test_usage_limit_waits_for_the_reset_and_gives_the_attempt_back() -> None:
    limited = Outcome(OutcomeKind.USAGE_LIMITED, retry_at=NOW + 7_200_000)

    # even on the last allowed attempt: a usage limit is not the task's failure
    assert decide(task(attempt_count=4, max_retries=3), limited, SETTINGS, NOW, FixedRandom(0.0)) == Requeue(
        retry_at=NOW + 7_200_000, count_attempt=False
    )


def test_usage_limit_without_a_reset_time_uses_the_fallback() -> None:
    decision = decide(task(1), Outcome(OutcomeKind.USAGE_LIMITED), SETTINGS, NOW, FixedRandom(0.0))

    assert decision == Requeue(retry_at=NOW + 3_600_000, count_attempt=False)


def test_usage_limit_reset_in_the_past_means_now() -> None:
    decision = decide(task(1), Outcome(OutcomeKind.USAGE_LIMITED, retry_at=NOW - 5), SETTINGS, NOW, FixedRandom(0.0))

    assert decision == Requeue(retry_at=NOW, count_attempt=False)


def test_failed_checks_retry_at_once_counting_the_attempt_until_attempts_run_out() -> None:
    failed = Outcome(OutcomeKind.CHECKS_FAILED, summary="check failed: pytest -q (exit 1)")
    assert decide(task(attempt_count=2), failed, SETTINGS, NOW, FixedRandom(0.5)) == Requeue(NOW, count_attempt=True)
    assert decide(task(attempt_count=4), failed, SETTINGS, NOW, FixedRandom(0.5)) == Finish(TaskStatus.FAILED)


def test_a_success_a_person_reviews_is_held_for_them_and_nothing_else_is() -> None:
    reviewed = Outcome(OutcomeKind.SUCCESS, review=True)
    assert decide(task(attempt_count=1), reviewed, SETTINGS, NOW, FixedRandom(0.5)) == Review()
    failed = Outcome(OutcomeKind.FAILED, review=True)
    assert decide(task(attempt_count=1), failed, SETTINGS, NOW, FixedRandom(0.5)) == Finish(TaskStatus.FAILED)
    plain = Outcome(OutcomeKind.SUCCESS)
    assert decide(task(attempt_count=1), plain, SETTINGS, NOW, FixedRandom(0.5)) == Finish(TaskStatus.COMPLETED)
