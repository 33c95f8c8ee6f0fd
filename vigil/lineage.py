"""A task's parent chain: the follow-up's context, for the prompt and the agent's view."""

from __future__ import annotations

from vigil.errors import TaskNotFound
from vigil.models import Task
from vigil.store import Store

MAX_PARENTS = 10  # a chain longer than this is cut: the agent needs context, not history


async def parent_chain(store: Store, task: Task, limit: int = MAX_PARENTS) -> list[Task]:
    """``task``'s ancestors, nearest first, at most ``limit``; the chain stops at one
    that no longer exists (pruned)."""
    parents: list[Task] = []
    parent_id = task.parent_id
    while parent_id is not None and len(parents) < limit:
        try:
            parent = await store.get_task(parent_id)
        except TaskNotFound:
            break
        parents.append(parent)
        parent_id = parent.parent_id
    return parents
