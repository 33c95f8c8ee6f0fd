"""The vocabulary of the store contract tests: task and outcome builders, checks."""

from __future__ import annotations

from vigil.config import DispatchSettings
from vigil.fate import Policy
from vigil.models import Claim, NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store import Store

# A transient failure recorded under this policy is due again at once: no backoff.
NO_BACKOFF = Policy(DispatchSettings(retry_backoff_ms=0))


def new(subject: str = "task", **fields: object) -> NewTask:
    return NewTask(subject, **fields)  # type: ignore[arg-type]


def success(**fields: object) -> Outcome:
    return Outcome(OutcomeKind.SUCCESS, **fields)  # type: ignore[arg-type]


ENDINGS = {TaskStatus.COMPLETED: OutcomeKind.SUCCESS, TaskStatus.FAILED: OutcomeKind.FAILED}


def ending(status: TaskStatus, **fields: object) -> Outcome:
    """An outcome that ends a claimed task with ``status`` (completed, failed or
    canceled) when it is recorded."""
    return Outcome(ENDINGS.get(status, OutcomeKind.CANCELED), **fields)  # type: ignore[arg-type]


async def claim(store: Store, worker: str = "w1") -> Claim:
    """Claim the next task, failing the test when nothing is due."""
    got = await store.claim_next(worker=worker, lease_ms=60_000)
    assert got is not None, "expected a due task"
    return got


async def all_tasks(store: Store) -> list[Task]:
    return await store.list_tasks(limit=1_000_000)


async def assert_counts_match(store: Store) -> None:
    """The trigger-kept counts equal a real count of the rows."""
    counted = dict.fromkeys(TaskStatus, 0)
    for task in await all_tasks(store):
        counted[task.status] += 1
    assert await store.count_by_status() == counted
