"""A person's review of a task's result: approve (and merge), or request changes.

``approve`` on a task awaiting review whose agent worked on a repository lands the
task's artifact (the commit shown by ``vigil task diff``) on its base as the task's
``merge`` says (``vigil.merging``), then completes the task with the merge
recorded on it and in its audit trail. The caller may name the commit it showed
(``commit``: the CLI's ``--commit``, always the TUI's): the approval is refused
when the task's artifact is another. The landing is recorded on the task before
the base moves (``Worktree.merging``), so an approval cut short (a kill at any
step) is finished by the next one, and the task's state agrees with the
repository. When the artifact does not merge (a conflict, or a base ``ff`` cannot
reach), nothing is merged and the task goes back to the agent, the conflict named
in a note its next prompt shows. An empty change is approved with nothing merged.
``request_changes`` sends a task awaiting review back to the queue with the
person's comment as that note. ``publish_change`` is the ``pull_request`` merge
mode's step (push, then find or open the pull request), shared by an approval
and by a run that succeeds without review (``dispatch.worktree``).

The CLI (``vigil task approve`` / ``reject``) and the TUI's review actions call
these, so both act alike. Git runs in a worker thread: the TUI's event loop never
waits on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace

from vigil import git
from vigil.clones import adopted, in_repo
from vigil.codework import DEFAULT_MERGE, PULL_REQUEST, CheckResult, Worktree
from vigil.config import GitHubSettings
from vigil.errors import GitError, InputError, InvalidTransition
from vigil.merging import Conflict, Landing, Merged, Unchanged, checkout_problem, land, landed, plan
from vigil.models import Task
from vigil.pull_requests import Published, publish
from vigil.store import Store
from vigil.taskdiff import reviewed_commit


@dataclass(frozen=True, slots=True)
class Approval:
    """What an approval did: ``task`` as it is now; ``merged`` when its artifact
    was landed (for ``branch``, put on its branch); ``conflict`` when it went back
    instead; ``unchanged`` when there was nothing to merge."""

    task: Task
    merged: Merged | None = None
    conflict: Conflict | None = None
    unchanged: Unchanged | None = None
    published: Published | None = None

    def describe(self) -> str:
        """One line for people: what became of the task and its change."""
        task = self.task
        if self.published is not None:
            how = "opened" if self.published.opened else "already open, reused"
            return f"task #{task.id} approved; completed; pull request {self.published.link.pull_url} ({how})"
        if self.conflict is not None:
            return f"task #{task.id} not merged, sent back to its agent: {self.conflict.what}"
        if self.unchanged is not None:
            return f"task #{task.id} approved; {task.status}; {self.unchanged.what}"
        worktree = task.worktree
        if self.merged is None or worktree is None:
            return f"task #{task.id} approved; {task.status}"
        if self.merged.mode == "branch":
            return (
                f"task #{task.id} approved; completed; branch {worktree.branch} left for a pull request "
                f"at {self.merged.commit[:12]}"
            )
        said = (
            f"task #{task.id} approved; completed; {worktree.branch} merged into {worktree.base} "
            f"({self.merged.mode}) at {self.merged.commit[:12]}"
        )
        return said if self.merged.warning is None else f"{said}; {self.merged.warning}"


def merge_message(task: Task) -> str:
    """The message of a commit a merge makes: the subject, then where it came from."""
    branch = task.worktree.branch if task.worktree is not None else "?"
    return f"{task.subject}\n\nVigil task #{task.id}, branch {branch}"


async def approve(
    store: Store, task_id: int, *, actor: str, commit: str | None = None, github: GitHubSettings | None = None
) -> Approval:
    """Approve the task: one awaiting approval becomes pending; one awaiting review
    is completed, after its artifact (if it has one not yet merged) is landed.
    ``commit``: the artifact the person reviewed (a prefix of at least 7 hex
    digits will do). ``github``: where a ``pull_request`` merge goes (None: the
    defaults of ``[github]``). Raises ``InvalidTransition`` for a task awaiting neither,
    ``InputError`` when ``commit`` is not the task's artifact, ``GitError`` when the
    merge cannot be tried (the base's checkout has local changes …): then nothing
    changed and the task still awaits review."""
    task = await store.get_task(task_id)
    worktree = task.worktree
    if worktree is not None and worktree.merged is None:
        worktree = await asyncio.to_thread(adopted, worktree)  # a task from before clones
    if not task.awaiting_review or worktree is None or worktree.merged is not None:
        if commit is not None and (worktree is None or not _names(commit, reviewed_commit(worktree))):
            raise InputError(f"task #{task_id} has no change {commit!r} to approve")
        return Approval(await store.approve(task_id, actor=actor))
    artifact = reviewed_commit(worktree)
    if commit is not None and not _names(commit, artifact):
        raise InputError(
            f"task #{task_id}'s change is now {artifact[:12]}, not the {commit} you reviewed: "
            f"look at it again (vigil task diff {task_id}), then approve that"
        )
    mode = worktree.merge or DEFAULT_MERGE
    if mode == PULL_REQUEST:
        return await _approve_as_pull_request(
            store, task, worktree, artifact, actor=actor, settings=github or GitHubSettings()
        )
    result = await asyncio.to_thread(_resume_or_plan, worktree, artifact, mode, merge_message(task))
    if isinstance(result, Conflict):
        back = await store.reject(task_id, f"merge conflict: {result.what}", actor=actor)
        return Approval(back, conflict=result)
    if isinstance(result, Unchanged):
        return Approval(await store.approve(task_id, actor=actor), unchanged=result)
    if isinstance(result, Landing):
        problem = await asyncio.to_thread(checkout_problem, worktree, result)
        if problem is not None and not await asyncio.to_thread(landed, worktree, result):
            raise GitError(problem)
        if worktree.merging != result.intent():
            worktree = replace(worktree, merging=result.intent())
            await store.set_worktree(task_id, worktree)  # before the base moves: a re-run finishes it
        result = await asyncio.to_thread(land, worktree, result)
    merged = replace(worktree, merge=result.mode, merged=result.commit, merged_from=result.since, merging=None)
    return Approval(await store.approve(task_id, actor=actor, merged=merged), merged=result)


async def _approve_as_pull_request(
    store: Store, task: Task, worktree: Worktree, artifact: str, *, actor: str, settings: GitHubSettings
) -> Approval:
    """Push the artifact and open (or reuse) its pull request, then complete the task
    with the pull request on it. Raises ``GitError``/``GitHubError`` with nothing
    recorded: the task still awaits review and approving again is safe."""
    runs = await store.list_runs(task.id)
    checks = runs[-1].checks if runs else ()
    done = await publish_change(store, task, worktree, artifact, checks=checks, settings=settings)
    if isinstance(done, Unchanged):
        return Approval(await store.approve(task.id, actor=actor), unchanged=done)
    published, merged = done
    return Approval(await store.approve(task.id, actor=actor, merged=merged), published=published)


async def publish_change(
    store: Store,
    task: Task,
    worktree: Worktree,
    artifact: str,
    *,
    checks: Sequence[CheckResult],
    settings: GitHubSettings,
) -> tuple[Published, Worktree] | Unchanged:
    """The task's change ``artifact`` as its pull request (``merge = "pull_request"``):
    pushed to its branch, the pull request from that branch found or opened and
    recorded on the task (``tasks.github``). Returns it with ``worktree`` as it is
    once published (for the caller to record: the approval's, or the dispatcher's
    for a task without review), or ``Unchanged`` for an empty change (nothing
    pushed). Raises ``GitError``/``GitHubError`` with nothing recorded: trying again
    is safe (the push is a fast-forward or nothing, an open pull request is reused).
    Used by an approval and by a run that succeeds without review."""
    planned = await asyncio.to_thread(plan, worktree, artifact, "branch", merge_message(task))
    if isinstance(planned, Unchanged):
        return planned
    published = await publish(task, worktree, artifact, checks, settings)
    await store.set_github(task.id, published.link)
    since = planned.since if isinstance(planned, Landing) else worktree.start
    return published, replace(worktree, merge=PULL_REQUEST, merged=artifact, merged_from=since, merging=None)


def _names(given: str, commit: str) -> bool:
    """Whether ``given`` (a commit id or a prefix of at least 7 of its digits) names ``commit``."""
    given = given.strip().lower()
    return len(given) >= 7 and commit.startswith(given)


def _resume_or_plan(
    worktree: Worktree, artifact: str, mode: str, message: str
) -> Landing | Merged | Conflict | Unchanged:
    """The landing an approval cut short had begun, when its base is still where it
    was or already moved by it; else a new plan."""
    if worktree.merging is not None:
        begun = Landing.from_intent(worktree.merging)
        if begun.artifact == artifact and begun.mode == mode:
            at_now = git.commit_of(in_repo(worktree), begun.ref)
            if at_now == begun.old or landed(worktree, begun):
                return begun
    return plan(worktree, artifact, mode, message)


async def request_changes(store: Store, task_id: int, comment: str, *, actor: str) -> Task:
    """Send a task awaiting review back to the queue, ``comment`` stored as a note
    that its next attempt's prompt shows (``Store.reject``). The next attempt, in a
    fresh clone at the task's artifact, resumes the reviewed run's agent session
    with the comment as its new message where it can (``dispatch.resumption``).
    Raises ``InputError`` for an empty comment,
    ``InvalidTransition`` for a task not awaiting review."""
    task = await store.get_task(task_id)
    if not task.awaiting_review:
        raise InvalidTransition(task_id, f"{task.status} and not awaiting review", "request changes")
    return await store.reject(task_id, comment, actor=actor)
