"""The fate policy: which outcomes retry, the backoff, usage limits, put-backs, cancels."""

from __future__ import annotations

import random

import pytest

from vigil.config import DispatchSettings
from vigil.fate import Fate, Policy, after_attempt, after_request, put_back
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


def policy(draw: float = 0.0, settings: DispatchSettings = SETTINGS) -> Policy:
    return Policy(settings, FixedRandom(draw))


def task(attempt_count: int, max_retries: int = 3, *, cancel_requested: bool = False) -> Task:
    return Task(
        id=1, subject="s", description="", skills=(), priority=5, status=TaskStatus.ACTIVE, source="human",
        source_key=None, dedup=DedupScope.OPEN, parent_id=None, scheduled_for=NOW, created_at=NOW, updated_at=NOW,
        started_at=NOW, completed_at=None, attempt_count=attempt_count, max_retries=max_retries, cost_usd=0.0,
        api_cost_usd=0.0, tokens_in=0, tokens_out=0, result_summary=None, result_detail=None, model=None,
        executor=None, claimed_by="w", lease_until=None, cancel_requested=cancel_requested, waiting_on=0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("retry_number", "low", "high"),
    [(1, 5_000, 10_000), (2, 10_000, 20_000), (3, 20_000, 40_000), (4, 30_000, 60_000), (40, 30_000, 60_000)],
)
def test_backoff_doubles_with_equal_jitter_and_a_cap(retry_number: int, low: int, high: int) -> None:
    assert policy(0.0).backoff_ms(retry_number) == low
    assert policy(0.999999).backoff_ms(retry_number) == high - 1
    drawn = {Policy(SETTINGS, random.Random(seed)).backoff_ms(retry_number) for seed in range(50)}
    assert all(low <= d < high for d in drawn)
    assert len(drawn) > 10  # jitter spreads retries out


@pytest.mark.parametrize(
    "kind",
    [
        OutcomeKind.TRANSIENT,
        OutcomeKind.STALLED,
        OutcomeKind.TIMEOUT,
        OutcomeKind.INTERRUPTED,
        OutcomeKind.SANDBOX_FAILED,
    ],
)
def test_retryable_outcomes_are_requeued_after_the_backoff(kind: OutcomeKind) -> None:
    fate = after_attempt(task(attempt_count=2), Outcome(kind), policy(), NOW)

    assert fate == Fate(TaskStatus.PENDING, retry_at=NOW + 10_000, count_attempt=True)


@pytest.mark.parametrize(
    "kind", [OutcomeKind.TRANSIENT, OutcomeKind.TIMEOUT, OutcomeKind.INTERRUPTED, OutcomeKind.SANDBOX_FAILED]
)
def test_retryable_outcomes_fail_when_attempts_are_exhausted(kind: OutcomeKind) -> None:
    spent = after_attempt(task(attempt_count=4, max_retries=3), Outcome(kind, summary="boom"), policy(), NOW)
    assert spent == Fate(TaskStatus.FAILED, summary="gave up after 4 attempts: boom")
    no_retries = after_attempt(task(attempt_count=1, max_retries=0), Outcome(kind), policy(), NOW)
    assert no_retries.status is TaskStatus.FAILED
    assert str(no_retries.summary).startswith("gave up after 1 attempt: ")


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
    assert after_attempt(task(attempt_count=1), Outcome(kind), policy(), NOW) == Fate(status)


@pytest.mark.parametrize("kind", [OutcomeKind.AUTH, OutcomeKind.REFUSED, OutcomeKind.STOPPED])
def test_auth_refused_and_stopped_give_the_task_back_now_without_counting(kind: OutcomeKind) -> None:
    # even on the last allowed attempt: the credentials, the set-up or the operator are at fault
    fate = after_attempt(task(attempt_count=4, max_retries=3), Outcome(kind), policy(), NOW)

    assert fate == Fate(TaskStatus.PENDING, retry_at=NOW, count_attempt=False)


def test_a_usage_limit_gives_the_attempt_back_and_the_task_is_due_at_once() -> None:
    """The limit stops the account, not the task: it runs at once on another free
    account; when there is none the guard gates the loop until the earliest reset."""
    for retry_at in (NOW + 7_200_000, None, NOW - 5):
        limited = Outcome(OutcomeKind.USAGE_LIMITED, retry_at=retry_at)
        # even on the last allowed attempt: a usage limit is not the task's failure
        fate = after_attempt(task(attempt_count=4, max_retries=3), limited, policy(), NOW)
        assert fate == Fate(TaskStatus.PENDING, retry_at=NOW, count_attempt=False)


def test_a_stall_is_retried_with_backoff_and_over_budget_fails() -> None:
    stalled = after_attempt(task(1), Outcome(OutcomeKind.STALLED), policy(), NOW)
    assert (stalled.status, stalled.count_attempt) == (TaskStatus.PENDING, True)
    assert stalled.retry_at is not None
    assert stalled.retry_at > NOW
    assert after_attempt(task(1), Outcome(OutcomeKind.OVER_BUDGET), policy(), NOW) == Fate(TaskStatus.FAILED)


def test_success_with_denials_is_held_for_review_only_when_configured() -> None:
    denied = Outcome(OutcomeKind.SUCCESS, summary="done", permission_denials=("Bash(rm -rf /)",))

    held = after_attempt(task(1), denied, policy(), NOW)
    assert held == Fate(TaskStatus.BLOCKED, summary="done", review=True)
    trusting = DispatchSettings(on_denial="complete")
    assert after_attempt(task(1), denied, policy(settings=trusting), NOW) == Fate(TaskStatus.COMPLETED, summary="done")


@pytest.mark.parametrize("kind", [OutcomeKind.TRANSIENT, OutcomeKind.STOPPED, OutcomeKind.USAGE_LIMITED])
def test_a_cancel_request_wins_over_going_back_to_the_queue(kind: OutcomeKind) -> None:
    fate = after_attempt(task(1, cancel_requested=True), Outcome(kind), policy(), NOW)

    assert fate.status is TaskStatus.CANCELED


def test_a_cancel_request_does_not_undo_a_finished_result() -> None:
    fate = after_attempt(task(1, cancel_requested=True), Outcome(OutcomeKind.SUCCESS), policy(), NOW)

    assert fate.status is TaskStatus.COMPLETED


def test_the_agents_own_retry_request_counts_and_runs_out() -> None:
    later = NOW + 60_000
    assert after_request(task(2), later, "later") == Fate(TaskStatus.PENDING, retry_at=later, summary="later")
    assert after_request(task(4, max_retries=3), later, "later") == Fate(
        TaskStatus.FAILED, summary="gave up after 4 attempts: later"
    )


def test_put_back_gives_the_attempt_back_and_approval_blocks() -> None:
    assert put_back(task(1), until=NOW + 5) == Fate(TaskStatus.PENDING, retry_at=NOW + 5, count_attempt=False)
    assert put_back(task(1), until=None) == Fate(TaskStatus.BLOCKED, count_attempt=False, approval=True)
    assert put_back(task(1, cancel_requested=True), until=None).status is TaskStatus.CANCELED


def test_failed_checks_retry_at_once_counting_the_attempt_until_attempts_run_out() -> None:
    failed = Outcome(OutcomeKind.CHECKS_FAILED, summary="check failed: pytest -q (exit 1)")
    again = after_attempt(task(attempt_count=2), failed, policy(), NOW)
    assert again == Fate(TaskStatus.PENDING, retry_at=NOW, summary="check failed: pytest -q (exit 1)")
    spent = after_attempt(task(attempt_count=4), failed, policy(), NOW)
    assert spent == Fate(TaskStatus.FAILED, summary="gave up after 4 attempts: check failed: pytest -q (exit 1)")


def test_a_success_a_person_reviews_is_held_for_them_and_nothing_else_is() -> None:
    reviewed = after_attempt(task(1), Outcome(OutcomeKind.SUCCESS, review=True), policy(), NOW)
    assert (reviewed.status, reviewed.review) == (TaskStatus.BLOCKED, True)
    failed = after_attempt(task(1), Outcome(OutcomeKind.FAILED, review=True), policy(), NOW)
    assert failed == Fate(TaskStatus.FAILED)
    assert after_attempt(task(1), Outcome(OutcomeKind.SUCCESS), policy(), NOW) == Fate(TaskStatus.COMPLETED)
