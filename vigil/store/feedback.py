"""What a task's pull request said, applied in the transaction of the sensor run
that saw it (``State.record_sensor_run``).

The sensor keeps the keys of what it has already returned (a review's id, a check
suite at a head commit) in its state, which commits in this same transaction: a
crash between the two cannot apply a review twice or lose one. A send-back is the
store's reject path for a task that already completed: pending and due now, the
review comments a note its next attempt's prompt shows, its attempt count kept,
and the merge its approval recorded undone (``worktree.merged`` cleared), so the
next approval pushes the new work to the same branch.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from vigil.models import TaskFeedback, TaskStatus
from vigil.store.sql.tasks import ADD_EVENT, ADD_NOTE, GET_TASK, HOLDER_OF_KEY, SEND_BACK
from vigil.store.tasks import task_of
from vigil.store.transaction import Tx

log = logging.getLogger("vigil.store")


def apply_feedback(tx: Tx, item: TaskFeedback, now: int, actor: str) -> bool:
    """Record ``item`` on its task inside ``tx``; False (nothing written) when the
    task is gone or its pull request is not ``item``'s (a branch named like Vigil's
    on someone else's pull request changes nothing)."""
    row = tx.one(GET_TASK, {"id": item.task_id})
    if row is None:
        return False
    task = task_of(tx, row)
    link = task.github
    if link is None or link.pull != item.pull or link.repo != item.repo:
        return False
    values = {"id": task.id, "now": now, "actor": actor}
    tx.one(ADD_NOTE, {**values, "author": actor, "text": item.note})
    event = {"kind": "github", "from_value": f"{item.repo}#{item.pull}", "to_value": item.event, "detail": None}
    tx.run(ADD_EVENT, {**values, **event})
    if item.send_back and task.status == TaskStatus.COMPLETED:
        if task.source_key and _held_by_another(tx, task.id, task.source_key):
            log.warning("task #%d: not sent back, another open task has its source key", task.id)
            return True
        worktree = task.worktree and replace(task.worktree, merged=None, merged_from=None, merging=None)
        tx.one(SEND_BACK, {**values, "worktree": None if worktree is None else worktree.to_json()})
    return True


def _held_by_another(tx: Tx, task_id: int, key: str) -> bool:
    """Whether another open task holds ``key`` (reopening this one would break the
    one-open-task-per-key rule, and with it the whole run's transaction)."""
    holder = tx.one(HOLDER_OF_KEY, {"key": key})
    if holder is None or holder["id"] is None or int(holder["id"]) == task_id:
        return False
    other = tx.one(GET_TASK, {"id": int(holder["id"])})
    return other is not None and TaskStatus(other["status"]).is_open
