"""A run's code work, for the dispatcher: the task's clone before its agent
starts, and once the agent has ended, what the run left and whether the checks
pass (docs/coding.md).

Before the run: the task's clone is made afresh (``vigil.clones``: from the base,
or from the task's artifact on a retry) and recorded on the task, with the merge
mode an approval would use; a repository that is missing or not one, or a base
that does not exist, raises ``RepositoryError`` and the task fails before any
agent starts. After the run: what the agent left is taken out as the task's new
artifact (recorded on the task), the run's commits and the artifact's diff stat
are put on the outcome, and work that could not be taken is a denial (the task
then waits for a person); a repository gone during the run fails the task. Then,
when the agent ended a run it considers done, the checks run, and one that fails
makes the outcome ``checks_failed`` (retried, its output in the next prompt).
Last, for a task whose success nobody reviews and whose ``merge`` is
``pull_request``, a success is pushed and opened as its pull request
(``CodeWork.published``), or, when git or GitHub refuses, waits for a person.
The loop watches all of that as one run (``CodeWork.run``): its lease is renewed
meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from dispatch.checks import Sandbox, run_checks
from dispatch.executors import ProcessStarted
from dispatch.workspace import Workspace
from vigil.clones import Settled, make_clone, renew_clone, retire, settle
from vigil.codework import DEFAULT_MERGE, Check, CodeOptions, Worktree
from vigil.config import GitHubSettings
from vigil.errors import GitError, GitHubError, RepositoryError, VigilError
from vigil.merging import Unchanged
from vigil.models import Outcome, OutcomeKind, Task, TaskStatus
from vigil.review import publish_change
from vigil.store import Store

log = logging.getLogger("vigil.dispatch")

CHECK_GRACE_S = 5.0  # SIGTERM → SIGKILL for a check's group


class CodeWork:
    """What one run's code work needs once its agent has ended. ``worktree`` None:
    the task works on no repository (checks and review may still apply).

    The loop watches ``run`` (the agent, then the branch's changes, then the
    checks) as it watches an executor: the lease is renewed and a cancel or a stop
    honoured while the checks run too. A run cut short gets its changes after the
    fact, from ``changes``, which does the git part once."""

    def __init__(
        self,
        *,
        task_id: int,
        attempt: int,
        worktree: Worktree | None,
        before: str | None,
        checks: tuple[Check, ...],
        review: bool,
        cwd: Path,
        env: Mapping[str, str],
        timeout_s: float,
        on_start: ProcessStarted | None = None,
        sandbox: Sandbox | None = None,
        store: Store | None = None,
        publish: Publish | None = None,
    ) -> None:
        self.task_id = task_id
        self.attempt = attempt
        self.worktree = worktree
        self.before = before
        self.checks = checks
        self.review = review
        self.cwd = cwd
        self.env = env
        self.timeout_s = timeout_s
        self.on_start = on_start
        self.sandbox = sandbox  # None: the checks run unconfined
        self.store = store  # where the new artifact is recorded (None: nowhere, in tests)
        self.publish = publish  # a success becomes a pull request (no review, merge = "pull_request")
        self._settled: Settled | RepositoryError | None = None

    @property
    def gated(self) -> bool:
        """The result waits on checks or a person, not on the agent's word."""
        return bool(self.checks) or self.review or self.publish is not None

    async def run(self, store: Store, agent: Awaitable[Outcome]) -> Outcome:
        """The agent's run (``agent``, the executor's), then what it left on the
        branch, then the checks when the agent ended a run it considers done, then
        its pull request when the run succeeded and nobody reviews it."""
        outcome = await self.changes(await agent)
        return await self.published(store, await self.checked(store, outcome))

    async def changes(self, outcome: Outcome) -> Outcome:
        """``outcome`` with whether a person reviews it and what the run left: the
        task's new artifact (recorded on the task), its commits and diff stat; work
        that could not be taken is a denial, a repository gone during the run a
        failure. Git runs once per run: a second call adds the same. A git failure
        is a denial too (the task waits for a person)."""
        outcome = replace(outcome, review=self.review or outcome.review)  # or: its pull request was refused
        if self.worktree is None or self.before is None:
            return outcome
        if self._settled is None:
            self._settled = await self._settle()
        if isinstance(self._settled, RepositoryError):
            why = f"the repository is gone: {self._settled}"
            return replace(outcome, kind=OutcomeKind.FAILED, summary=why, error=why)
        settled = self._settled
        denials = outcome.permission_denials
        if settled.problem is not None and settled.problem not in denials:
            denials += (settled.problem,)
        return replace(outcome, changes=settled.changes, permission_denials=denials)

    async def _settle(self) -> Settled | RepositoryError:
        assert self.worktree is not None
        assert self.before is not None
        label = f"Work left uncommitted by the agent (Vigil task #{self.task_id}, attempt {self.attempt})"
        try:
            settled = await asyncio.to_thread(settle, self.worktree, self.before, label)
        except RepositoryError as err:
            return err
        except VigilError as err:
            log.warning("task #%d: could not take the run's work: %s", self.task_id, err)
            return Settled(None, self.before, f"could not take the run's work: {err}")
        if settled.artifact != self.worktree.artifact and self.store is not None:
            await self.store.set_worktree(self.task_id, replace(self.worktree, artifact=settled.artifact))
        return settled

    async def retire(self) -> None:
        """The attempt is over: the clone's git folder goes (``vigil.clones.retire``),
        leaving its files for a person to look at. A failure is logged."""
        if self.worktree is None or self.before is None:
            return
        try:
            await asyncio.to_thread(retire, self.worktree)
        except OSError as err:
            log.warning("task #%d: could not remove its clone's git folder: %s", self.task_id, err)

    async def checked(self, store: Store, outcome: Outcome) -> Outcome:
        """``outcome`` with the checks' verdict, when there are checks and the agent
        ended a run it considers done: a success, the task neither closed nor put
        back by the agent itself. One check failing makes it ``checks_failed``."""
        if not self.checks or outcome.kind is not OutcomeKind.SUCCESS:
            return outcome
        if (await store.get_task(self.task_id)).status is not TaskStatus.ACTIVE:
            return outcome  # the agent closed it, or asked for a later attempt: not done
        results = await run_checks(
            self.checks,
            cwd=self.cwd,
            env=self.env,
            timeout_s=self.timeout_s,
            grace_s=CHECK_GRACE_S,
            on_start=self.on_start or _nothing,
            sandbox=self.sandbox,
        )
        failed = [result for result in results if not result.passed]
        if not failed:
            return replace(outcome, checks=results)
        first = failed[0]
        why = f"check failed: {first.label} ({first.how()})"
        more = f", and {len(failed) - 1} more" if len(failed) > 1 else ""
        return replace(outcome, kind=OutcomeKind.CHECKS_FAILED, checks=results, summary=why + more, error=why + more)

    async def published(self, store: Store, outcome: Outcome) -> Outcome:
        """``outcome`` once its change is a pull request, for a task whose success
        completes it (``publish``: no review, ``merge = "pull_request"``): the same
        idempotent step as an approval's (``vigil.review.publish_change``), recorded
        on the task before its run is. When git or GitHub refuses, nothing is
        recorded and the task waits for a person's review instead of completing
        without its pull request: the reason is a note and the run's error, and
        ``vigil task approve`` tries again (reusing what the first try made)."""
        publish = self.publish
        if publish is None or outcome.kind is not OutcomeKind.SUCCESS or outcome.review:
            return outcome
        if outcome.permission_denials and publish.denials_reviewed:
            return outcome  # a person reviews it first (on_denial = "review")
        task = await store.get_task(self.task_id)
        worktree = task.worktree
        if task.status is not TaskStatus.ACTIVE or worktree is None:
            return outcome  # canceled, or closed by its agent: not Vigil's to publish
        said = replace(task, result_summary=outcome.summary or task.result_summary)
        change = worktree.artifact or worktree.start  # this run's result
        try:
            done = await publish_change(store, said, worktree, change, checks=outcome.checks, settings=publish.settings)
        except (GitError, GitHubError) as err:
            why = f"pull request not opened: {err}"
            log.warning("task #%d: %s; it waits for a person's review", self.task_id, why)
            note = f"{why}. Nothing was recorded; `vigil task approve {self.task_id}` tries again."
            await store.add_note(self.task_id, note, author="dispatcher")
            return replace(outcome, review=True, error=why)
        if isinstance(done, Unchanged):
            return outcome  # an empty change: nothing to push
        published, merged = done
        await store.set_worktree(self.task_id, merged)
        how = "opened" if published.opened else "already open, reused"
        log.info("task #%d: pull request %s (%s)", self.task_id, published.link.pull_url, how)
        return outcome


@dataclass(frozen=True, slots=True)
class Publish:
    """Where a run's success goes as a pull request (``[github]``), and whether a
    success with actions refused to its agent waits for a person first."""

    settings: GitHubSettings
    denials_reviewed: bool


async def _nothing(pid: int, pgid: int, proc_start: str | None) -> None:
    """No record of a check's process (tests, or a run with nowhere to record it)."""


async def prepare_worktree(store: Store, task: Task, workspace: Workspace, code: CodeOptions) -> Worktree | None:
    """Make the task's clone afresh when ``workspace`` is one (from the base, or
    from the task's artifact on a retry), and record it (with the merge an
    approval would use); None when it is not. Raises ``RepositoryError`` for a
    repository or base that cannot be used, ``GitError`` when git fails."""
    if workspace.repo is None:
        return None
    if task.worktree is None:
        worktree = await asyncio.to_thread(
            make_clone,
            workspace.repo,
            workspace.path,
            task_id=task.id,
            subject=task.subject,
            base=workspace.base,
            start_commit=workspace.start_commit,
        )
    else:
        worktree = await asyncio.to_thread(renew_clone, await _settled_before(store, task, task.worktree))
    if worktree.merged is None:
        worktree = replace(worktree, merge=code.merge or DEFAULT_MERGE)
    if worktree != task.worktree:
        await store.set_worktree(task.id, worktree)
    return worktree


async def _settled_before(store: Store, task: Task, worktree: Worktree) -> Worktree:
    """``worktree`` with what an earlier attempt left in its clone taken out first,
    when that attempt never got to it (its dispatcher died mid-run: the clone
    still has its git folder); as it is otherwise."""
    if not (Path(worktree.path) / ".git").exists() or worktree.merged is not None:
        return worktree
    message = f"Work left by an attempt cut short (Vigil task #{task.id})"
    try:
        found = await asyncio.to_thread(settle, worktree, worktree.artifact or worktree.start, message)
    except VigilError as err:
        log.warning("task #%d: could not take what its last attempt left: %s", task.id, err)
        return worktree
    if found.problem is not None:
        log.warning("task #%d: what its last attempt left: %s", task.id, found.problem)
    if found.artifact == worktree.artifact:
        return worktree
    taken = replace(worktree, artifact=found.artifact)
    await store.set_worktree(task.id, taken)
    return taken


def start_of(worktree: Worktree | None) -> str | None:
    """The commit the attempt's clone starts at (None: no clone)."""
    return None if worktree is None else worktree.artifact or worktree.start
