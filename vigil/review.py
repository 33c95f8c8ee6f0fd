"""A person's review of a task's result: approve (and merge), or request changes.

``approve`` on a task awaiting review whose agent worked on a branch merges the
branch into its base as the task's ``merge`` says (``vigil.merging``), then
completes the task with the merge recorded on it and in its audit trail. When the
branch does not merge (a conflict, or a base ``ff`` cannot reach), nothing is
merged and the task goes back to the agent, the conflict named in a note its next
prompt shows. ``request_changes`` sends a task awaiting review back to the queue
with the person's comment as that note.

The CLI (``vigil task approve`` / ``reject``) and the TUI's review actions call
these, so both act alike. Git runs in a worker thread: the TUI's event loop never
waits on it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from vigil.codework import DEFAULT_MERGE
from vigil.errors import InvalidTransition
from vigil.merging import Conflict, Merged, merge_branch
from vigil.models import Task
from vigil.store import Store


@dataclass(frozen=True, slots=True)
class Approval:
    """What an approval did: ``task`` as it is now; ``merged`` when its branch was
    merged (or, for ``branch``, recorded); ``conflict`` when it went back instead."""

    task: Task
    merged: Merged | None = None
    conflict: Conflict | None = None

    def describe(self) -> str:
        """One line for people: what became of the task and its branch."""
        task = self.task
        if self.conflict is not None:
            return f"task #{task.id} not merged, sent back to its agent: {self.conflict.what}"
        worktree = task.worktree
        if self.merged is None or worktree is None:
            return f"task #{task.id} approved; {task.status}"
        if self.merged.mode == "branch":
            return f"task #{task.id} approved; completed; branch {worktree.branch} left for a pull request"
        return (
            f"task #{task.id} approved; completed; {worktree.branch} merged into {worktree.base} "
            f"({self.merged.mode}) at {self.merged.commit[:12]}"
        )


def merge_message(task: Task) -> str:
    """The message of a commit a merge makes: the subject, then where it came from."""
    branch = task.worktree.branch if task.worktree is not None else "?"
    return f"{task.subject}\n\nVigil task #{task.id}, branch {branch}"


async def approve(store: Store, task_id: int, *, actor: str) -> Approval:
    """Approve the task: one awaiting approval becomes pending; one awaiting review
    is completed, after its branch (if it has one not yet merged) is merged.
    Raises ``InvalidTransition`` for a task awaiting neither, ``GitError`` when the
    merge cannot be tried (the base's checkout has local changes …): then nothing
    changed and the task still awaits review."""
    task = await store.get_task(task_id)
    worktree = task.worktree
    if not task.awaiting_review or worktree is None or worktree.merged is not None:
        return Approval(await store.approve(task_id, actor=actor))
    result = await asyncio.to_thread(merge_branch, worktree, worktree.merge or DEFAULT_MERGE, merge_message(task))
    if isinstance(result, Conflict):
        back = await store.reject(task_id, f"merge conflict: {result.what}", actor=actor)
        return Approval(back, conflict=result)
    merged = replace(worktree, merge=result.mode, merged=result.commit, merged_from=result.since)
    return Approval(await store.approve(task_id, actor=actor, merged=merged), merged=result)


async def request_changes(store: Store, task_id: int, comment: str, *, actor: str) -> Task:
    """Send a task awaiting review back to the queue, ``comment`` stored as a note
    that its next attempt's prompt shows (``Store.reject``). The next attempt starts
    a new agent session in the same worktree; carrying the reviewed session on
    (``Run.session_id``, the CLI's resume) would plug in where the attempt is
    prepared, not here. Raises ``InputError`` for an empty comment,
    ``InvalidTransition`` for a task not awaiting review."""
    task = await store.get_task(task_id)
    if not task.awaiting_review:
        raise InvalidTransition(task_id, f"{task.status} and not awaiting review", "request changes")
    return await store.reject(task_id, comment, actor=actor)
