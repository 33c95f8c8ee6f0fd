"""The async face of the blocking store behaviours, shared by both backends.

Each method runs the blocking call whole in the store's worker thread (``_hop``):
one hop per unit of work, no transaction open across an await, and a cancelled
caller's transaction still runs to its commit or rollback. SQLite hops to its
connection's own thread, PostgreSQL to a thread that borrows a pooled session.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from vigil.models import (
    AddResult,
    BatchResult,
    Claim,
    CostRow,
    NewTask,
    Note,
    Outcome,
    Run,
    Task,
    TaskEvent,
    TaskStatus,
)
from vigil.store import CostGroup
from vigil.store.dispatching import Dispatching
from vigil.store.tasks import Tasks

T = TypeVar("T")


class Hopping:
    """A store whose blocking calls run in its worker thread."""

    async def _hop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in the store's worker thread (each store says how)."""
        raise NotImplementedError


class AsyncTasks(Hopping):
    """The task methods of ``Store`` (see its docstrings), mixed into each backend's store."""

    tasks: Tasks

    async def add_task(self, new: NewTask, *, actor: str = "human") -> AddResult:
        return await self._hop(self.tasks.add_task, new, actor=actor)

    async def add_tasks(self, news: Sequence[NewTask], *, actor: str) -> BatchResult:
        return await self._hop(self.tasks.add_tasks, news, actor=actor)

    async def get_task(self, task_id: int) -> Task:
        return await self._hop(self.tasks.get_task, task_id)

    async def list_tasks(
        self, *, statuses: Collection[TaskStatus] | None = None, limit: int = 50, before_id: int | None = None
    ) -> list[Task]:
        return await self._hop(self.tasks.list_tasks, statuses=statuses, limit=limit, before_id=before_id)

    async def search_tasks(
        self,
        text: str,
        *,
        statuses: Collection[TaskStatus] | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Task]:
        return await self._hop(self.tasks.search_tasks, text, statuses=statuses, limit=limit, before_id=before_id)

    async def queue(self, *, limit: int = 200) -> list[Task]:
        return await self._hop(self.tasks.queue, limit=limit)

    async def count_by_status(self) -> dict[TaskStatus, int]:
        return await self._hop(self.tasks.count_by_status)

    async def next_due_at(self) -> int | None:
        return await self._hop(self.tasks.next_due_at)

    async def list_runs(self, task_id: int) -> list[Run]:
        return await self._hop(self.tasks.list_runs, task_id)

    async def list_events(self, task_id: int) -> list[TaskEvent]:
        return await self._hop(self.tasks.list_events, task_id)

    async def events_after(
        self,
        after_id: int,
        *,
        since_ms: int | None = None,
        task_id: int | None = None,
        kinds: Collection[str] = (),
        limit: int = 500,
    ) -> list[TaskEvent]:
        events_after = self.tasks.events_after
        return await self._hop(events_after, after_id, since_ms=since_ms, task_id=task_id, kinds=kinds, limit=limit)

    async def list_notes(self, task_id: int) -> list[Note]:
        return await self._hop(self.tasks.list_notes, task_id)

    async def dependencies(self, task_id: int) -> list[int]:
        return await self._hop(self.tasks.dependencies, task_id)

    async def cost_rollup(self, *, since_ms: int, by: CostGroup) -> list[CostRow]:
        return await self._hop(self.tasks.cost_rollup, since_ms=since_ms, by=by)

    async def cancel(self, task_id: int, *, actor: str) -> Task:
        return await self._hop(self.tasks.cancel, task_id, actor=actor)

    async def set_priority(self, task_id: int, priority: int, *, actor: str) -> Task:
        return await self._hop(self.tasks.set_priority, task_id, priority, actor=actor)

    async def defer(self, task_id: int, until_ms: int, *, actor: str) -> Task:
        return await self._hop(self.tasks.defer, task_id, until_ms, actor=actor)

    async def retry(self, task_id: int, *, actor: str) -> Task:
        return await self._hop(self.tasks.retry, task_id, actor=actor)

    async def close_task(self, task_id: int, status: TaskStatus, summary: str, *, actor: str) -> Task:
        return await self._hop(self.tasks.close_task, task_id, status, summary, actor=actor)

    async def request_retry(self, task_id: int, retry_at: int, summary: str, *, actor: str) -> Task:
        return await self._hop(self.tasks.request_retry, task_id, retry_at, summary, actor=actor)

    async def add_note(self, task_id: int, text: str, *, author: str) -> Note:
        return await self._hop(self.tasks.add_note, task_id, text, author=author)

    async def approve(self, task_id: int, *, actor: str) -> Task:
        return await self._hop(self.tasks.approve, task_id, actor=actor)

    async def reject(self, task_id: int, reason: str, *, actor: str) -> Task:
        return await self._hop(self.tasks.reject, task_id, reason, actor=actor)


class AsyncDispatching(Hopping):
    """The dispatch methods of ``Store`` (see its docstrings), mixed into each backend's store."""

    dispatching: Dispatching

    async def claim_next(
        self, *, worker: str, lease_ms: int, executor: str | None = None, max_priority: int | None = None
    ) -> Claim | None:
        calls = self.dispatching
        return await self._hop(
            calls.claim_next, worker=worker, lease_ms=lease_ms, executor=executor, max_priority=max_priority
        )

    async def set_run_process(self, run_id: int, *, pid: int, pgid: int, proc_start: str | None) -> None:
        await self._hop(self.dispatching.set_run_process, run_id, pid=pid, pgid=pgid, proc_start=proc_start)

    async def set_executor(self, claim: Claim, executor: str) -> None:
        await self._hop(self.dispatching.set_executor, claim, executor)

    async def renew_lease(self, task_id: int, *, worker: str, lease_until: int) -> bool:
        return await self._hop(self.dispatching.renew_lease, task_id, worker=worker, lease_until=lease_until)

    async def finish(self, claim: Claim, outcome: Outcome, status: TaskStatus, *, worker: str) -> Task:
        return await self._hop(self.dispatching.finish, claim, outcome, status, worker=worker)

    async def finish_and_claim(
        self,
        claim: Claim,
        outcome: Outcome,
        status: TaskStatus,
        *,
        worker: str,
        lease_ms: int,
        executor: str | None = None,
        max_priority: int | None = None,
    ) -> tuple[Task, Claim | None]:
        return await self._hop(
            self.dispatching.finish_and_claim,
            claim,
            outcome,
            status,
            worker=worker,
            lease_ms=lease_ms,
            executor=executor,
            max_priority=max_priority,
        )

    async def requeue(self, claim: Claim, outcome: Outcome, *, retry_at: int, count_attempt: bool, worker: str) -> Task:
        calls = self.dispatching
        return await self._hop(
            calls.requeue, claim, outcome, retry_at=retry_at, count_attempt=count_attempt, worker=worker
        )

    async def hold_for_approval(self, claim: Claim, *, worker: str) -> Task:
        return await self._hop(self.dispatching.hold_for_approval, claim, worker=worker)

    async def release_unrun(self, claim: Claim, *, worker: str, retry_at: int) -> Task:
        return await self._hop(self.dispatching.release_unrun, claim, worker=worker, retry_at=retry_at)

    async def origin_of(self, task_id: int) -> str:
        return await self._hop(self.dispatching.origin_of, task_id)

    async def spend_since(self, since_ms: int) -> float:
        return await self._hop(self.dispatching.spend_since, since_ms)

    async def active_tasks(self) -> list[Task]:
        return await self._hop(self.dispatching.active_tasks)

    async def open_runs(self) -> list[Run]:
        return await self._hop(self.dispatching.open_runs)

    async def recover(self, run_id: int, outcome: Outcome, *, status: TaskStatus, retry_at: int | None = None) -> Task:
        return await self._hop(self.dispatching.recover, run_id, outcome, status=status, retry_at=retry_at)
