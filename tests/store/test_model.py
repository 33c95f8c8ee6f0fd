"""The store against a model: random sequences of operations (Hypothesis state
machine) must leave the same statuses, counts and claim choices as a plain Python
model of the store's rules (docs/store.md) would."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from tests.store.backends import fresh_location, open_backend
from tests.store.contract import ending
from vigil.clock import ManualClock
from vigil.config import DispatchSettings
from vigil.errors import DuplicateOpenTask, InvalidTransition
from vigil.fate import Policy
from vigil.models import (
    DEFAULT_MAX_RETRIES,
    FINISHED_STATUSES,
    OPEN_STATUSES,
    Claim,
    DedupScope,
    NewTask,
    Outcome,
    OutcomeKind,
    TaskStatus,
)
from vigil.store import Store

pytestmark = pytest.mark.slow

T = TypeVar("T")
KEYS = st.sampled_from([None, "a", "b", "c"])
EVER_KEYS = st.sampled_from(["x", "y"])  # dedup scope "ever": a key is used once, forever
FINAL = st.sampled_from([TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED])
NO_BACKOFF = Policy(DispatchSettings(retry_backoff_ms=0))


@dataclass
class Modeled:
    priority: int
    scheduled_for: int
    key: str | None
    deps: tuple[int, ...]
    status: TaskStatus = TaskStatus.PENDING
    cancel_requested: bool = False
    attempts: int = 0
    runs: int = 0
    needs_approval: bool = False  # once held for approval, a retry waits for approval again


@dataclass
class Model:
    tasks: dict[int, Modeled] = field(default_factory=dict)
    retired_keys: set[str] = field(default_factory=set)  # keys of pruned tasks

    def prune(self) -> set[int]:
        """Remove every finished task nothing left depends on, until none is left to
        remove (the model has no parent chains); returns the ids removed."""
        removed: set[int] = set()
        while doomed := [
            i
            for i, t in self.tasks.items()
            if t.status in FINISHED_STATUSES and not any(i in other.deps for other in self.tasks.values())
        ]:
            for i in doomed:
                key = self.tasks.pop(i).key
                if key is not None:
                    self.retired_keys.add(key)
            removed.update(doomed)
        return removed

    def open_holder(self, key: str | None) -> int | None:
        if key is None:
            return None
        return next((i for i, t in self.tasks.items() if t.key == key and t.status in OPEN_STATUSES), None)

    def next_claim(self, now: int) -> int | None:
        due = [
            (t.priority, t.scheduled_for, i)
            for i, t in self.tasks.items()
            if t.status is TaskStatus.PENDING
            and t.scheduled_for <= now
            and all(self.tasks[d].status is TaskStatus.COMPLETED for d in t.deps)
        ]
        return min(due)[2] if due else None


class StoreMachine(RuleBasedStateMachine):
    """Drives one store on its own event loop; another backend subclasses this with
    its name in ``backend`` and exposes its own ``TestCase``."""

    backend = "sqlite"
    postgres_admin: str | None = None  # the server's admin URL, for the postgres backend
    postgres_template: str | None = None  # a migrated database each example's is copied from

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.folder = tempfile.TemporaryDirectory()
        self.location = contextlib.ExitStack()
        where = self.location.enter_context(
            fresh_location(self.backend, Path(self.folder.name), self.postgres_admin, self.postgres_template)
        )
        self.clock = ManualClock()
        self.store: Store = self.run(open_backend(self.backend, where, self.clock))
        self.model = Model()
        self.claims: dict[int, Claim] = {}

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.store.close())
        self.loop.close()
        self.location.close()
        self.folder.cleanup()

    def some_id(self, data: st.DataObject) -> int:
        return data.draw(st.sampled_from(sorted(self.model.tasks)))

    @rule(priority=st.integers(1, 9), offset=st.integers(-3, 3), key=KEYS, data=st.data())
    def add(self, priority: int, offset: int, key: str | None, data: st.DataObject) -> None:
        deps: tuple[int, ...] = ()
        if self.model.tasks:
            deps = tuple(data.draw(st.sets(st.sampled_from(sorted(self.model.tasks)), max_size=2)))
        at = self.clock.now_ms() + offset
        new = NewTask("t", priority=priority, scheduled_for=at, source_key=key, depends_on=deps)
        result = self.run(self.store.add_task(new))
        holder = self.model.open_holder(key)
        if holder is not None:
            assert (result.created, result.task_id) == (False, holder)
            return
        assert result.created
        assert result.task_id is not None
        assert result.task_id not in self.model.tasks
        self.model.tasks[result.task_id] = Modeled(priority, at, key, deps)

    @rule(priority=st.integers(1, 9), key=EVER_KEYS)
    def add_ever(self, priority: int, key: str) -> None:
        at = self.clock.now_ms()
        result = self.run(self.store.add_task(NewTask("e", priority=priority, source_key=key, dedup=DedupScope.EVER)))
        first = next((i for i, t in self.model.tasks.items() if t.key == key), None)
        if first is not None:  # whatever became of it, the key stays used
            assert (result.created, result.task_id) == (False, first)
            return
        if key in self.model.retired_keys:  # its task was pruned: still used
            assert (result.created, result.task_id) == (False, None)
            return
        assert result.created
        assert result.task_id is not None
        self.model.tasks[result.task_id] = Modeled(priority, at, key, ())

    @rule()
    def claim(self) -> None:
        expected = self.model.next_claim(self.clock.now_ms())
        got = self.run(self.store.claim_next(worker="w", lease_ms=60_000))
        assert (None if got is None else got.task.id) == expected
        if got is not None:
            task = self.model.tasks[got.task.id]
            task.status, task.cancel_requested = TaskStatus.ACTIVE, False
            task.attempts += 1
            task.runs += 1
            assert got.attempt == task.runs
            self.claims[got.task.id] = got

    @precondition(lambda self: self.claims)
    @rule(final=FINAL, data=st.data())
    def finish(self, final: TaskStatus, data: st.DataObject) -> None:
        task_id = data.draw(st.sampled_from(sorted(self.claims)))
        self.run(self.store.record(self.claims.pop(task_id), ending(final), worker="w"))
        self.model.tasks[task_id].status = final

    @precondition(lambda self: self.claims)
    @rule(delay=st.integers(0, 3), count=st.booleans(), data=st.data())
    def requeue(self, delay: int, count: bool, data: st.DataObject) -> None:
        """Back to the queue: a transient failure (counted, due at once: no backoff
        here; failed once attempts run out) or a usage limit (not counted, due at
        once whatever reset it names: the account waits, not the task)."""
        task_id = data.draw(st.sampled_from(sorted(self.claims)))
        retry_at = self.clock.now_ms()
        reset = retry_at + delay
        outcome = Outcome(OutcomeKind.TRANSIENT) if count else Outcome(OutcomeKind.USAGE_LIMITED, retry_at=reset)
        self.run(self.store.record(self.claims.pop(task_id), outcome, worker="w", policy=NO_BACKOFF))
        task = self.model.tasks[task_id]
        if not count:
            task.attempts -= 1
        if count and task.attempts > DEFAULT_MAX_RETRIES:
            task.status = TaskStatus.FAILED  # out of attempts: even a cancel request does not change that
        elif task.cancel_requested:
            task.status = TaskStatus.CANCELED
        else:
            task.status, task.scheduled_for = TaskStatus.PENDING, retry_at

    @precondition(lambda self: self.claims)
    @rule(hold=st.booleans(), delay=st.integers(0, 3), data=st.data())
    def put_back_unrun(self, hold: bool, delay: int, data: st.DataObject) -> None:
        """The guard's two ways back: held for approval, or released until later."""
        task_id = data.draw(st.sampled_from(sorted(self.claims)))
        claim = self.claims.pop(task_id)
        retry_at = self.clock.now_ms() + delay
        self.run(self.store.put_back(claim, worker="w", until=None if hold else retry_at))
        task = self.model.tasks[task_id]
        task.attempts -= 1
        task.runs -= 1  # the unrun attempt's run is removed
        if task.cancel_requested:
            task.status = TaskStatus.CANCELED
        elif hold:
            task.status = TaskStatus.BLOCKED
            task.needs_approval = True
        else:
            task.status, task.scheduled_for = TaskStatus.PENDING, retry_at

    @precondition(lambda self: self.model.tasks)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        task_id = self.some_id(data)
        task = self.model.tasks[task_id]
        if task.status in (TaskStatus.PENDING, TaskStatus.BLOCKED):
            self.run(self.store.cancel(task_id, actor="human"))
            task.status = TaskStatus.CANCELED
        elif task.status is TaskStatus.ACTIVE:
            self.run(self.store.cancel(task_id, actor="human"))
            task.cancel_requested = True
        else:
            with pytest.raises(InvalidTransition):
                self.run(self.store.cancel(task_id, actor="human"))

    @precondition(lambda self: self.model.tasks)
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        task_id = self.some_id(data)
        task = self.model.tasks[task_id]
        if task.status not in (TaskStatus.FAILED, TaskStatus.CANCELED):
            with pytest.raises(InvalidTransition):
                self.run(self.store.retry(task_id, actor="human"))
        elif self.model.open_holder(task.key) is not None:
            with pytest.raises(DuplicateOpenTask):
                self.run(self.store.retry(task_id, actor="human"))
        else:
            self.run(self.store.retry(task_id, actor="human"))
            task.status = TaskStatus.BLOCKED if task.needs_approval else TaskStatus.PENDING
            task.scheduled_for, task.attempts = self.clock.now_ms(), 0
            task.cancel_requested = False

    @precondition(lambda self: self.model.tasks)
    @rule(priority=st.integers(1, 9), delay=st.integers(-2, 4), data=st.data())
    def reschedule(self, priority: int, delay: int, data: st.DataObject) -> None:
        task_id = self.some_id(data)
        task = self.model.tasks[task_id]
        if task.status in (TaskStatus.PENDING, TaskStatus.BLOCKED):
            self.run(self.store.set_priority(task_id, priority, actor="human"))
            self.run(self.store.defer(task_id, self.clock.now_ms() + delay, actor="human"))
            task.priority, task.scheduled_for = priority, self.clock.now_ms() + delay
        else:
            with pytest.raises(InvalidTransition):
                self.run(self.store.set_priority(task_id, priority, actor="human"))

    @precondition(lambda self: self.model.tasks)
    @rule(data=st.data())
    def block(self, data: st.DataObject) -> None:
        task_id = self.some_id(data)
        task = self.model.tasks[task_id]
        if task.status is TaskStatus.PENDING:
            self.run(self.store.close_task(task_id, TaskStatus.BLOCKED, "waits", actor="agent"))
            task.status = TaskStatus.BLOCKED

    @rule(ms=st.integers(1, 3))
    def tick(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(batch_size=st.integers(1, 3))
    def prune(self, batch_size: int) -> None:
        """Retention with every finished task old enough: what goes is decided by the
        dependency rule alone, across batches as small as one task."""
        result = self.run(self.store.prune(finished_before_ms=self.clock.now_ms() + 1, batch_size=batch_size))
        assert result.complete
        assert result.tasks == len(self.model.prune())

    @invariant()
    def statuses_and_counts_agree(self) -> None:
        tasks = self.run(self.store.list_tasks(limit=10_000))
        assert {t.id: t.status for t in tasks} == {i: t.status for i, t in self.model.tasks.items()}
        for t in tasks:
            modeled = self.model.tasks[t.id]
            assert (t.priority, t.cancel_requested, t.attempt_count) == (
                modeled.priority,
                modeled.cancel_requested,
                modeled.attempts,
            )
            if t.status is TaskStatus.PENDING:
                assert t.scheduled_for == modeled.scheduled_for
        expected = dict.fromkeys(TaskStatus, 0)
        for modeled in self.model.tasks.values():
            expected[modeled.status] += 1
        assert self.run(self.store.count_by_status()) == expected


StoreMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_store_follows_the_model = StoreMachine.TestCase


class PostgresStoreMachine(StoreMachine):
    backend = "postgres"


def test_postgres_store_follows_the_model(postgres_server: str, postgres_template: str) -> None:
    """The same machine on PostgreSQL, each example on a fresh database (fewer
    examples: creating a database costs far more than creating a file)."""
    PostgresStoreMachine.postgres_admin = postgres_server
    PostgresStoreMachine.postgres_template = postgres_template
    run_state_machine_as_test(
        PostgresStoreMachine, settings=settings(max_examples=30, stateful_step_count=40, deadline=None)
    )
