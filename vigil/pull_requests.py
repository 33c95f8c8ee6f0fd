"""An approved task's change as a pull request (``merge = "pull_request"``; docs/github.md).

``publish`` pushes exactly the reviewed commit (the artifact Vigil stored on
``refs/vigil/tasks/<id>`` in the operator's repository) to the task's branch
``vigil/<id>-<slug>`` on the repository's remote, then finds the pull request from
that branch or opens one against the task's base. Git runs on the host, in the
operator's repository, with the operator's own git credentials (``git push
<remote> <commit>:refs/heads/<branch>``); nothing is read from the agent's clone,
and no agent sandbox ever holds the credentials or the GitHub token.

Each step is safe to repeat, so an approval that failed half way (a push that went
through, then GitHub refused the pull request) is finished by trying again: a push
of a commit the branch already has changes nothing, and an open pull request from
the branch is reused, not opened twice. The push is never forced: a branch that
moved elsewhere on the remote is a refusal that names it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from vigil import git
from vigil.clones import in_repo
from vigil.codework import CheckResult, Worktree
from vigil.config import GitHubSettings
from vigil.errors import GitError, GitHubError, InputError
from vigil.github import Repo, client, token
from vigil.models import GitHubLink, Task

_REMOTE_URL = re.compile(r"(?:^git@[^:]+:|^(?:https?|ssh|git)://(?:[^@/]+@)?[^/]+/)(?P<slug>[^/]+/[^/]+?)(?:\.git)?/?$")


@dataclass(frozen=True, slots=True)
class Published:
    """The task's pull request: ``link`` as stored on the task; ``opened`` False when
    an open one from the branch was found and reused."""

    link: GitHubLink
    opened: bool


def repo_of(task: Task, worktree: Worktree, remote: str) -> Repo:
    """The GitHub repository of the task: its issue's, else its remote's URL. Raises
    ``GitHubError`` when the remote is not on GitHub and no issue names one."""
    if task.github is not None:
        return Repo.parse(task.github.repo)
    url = git.out(in_repo(worktree), "remote", "get-url", remote).strip()
    found = _REMOTE_URL.search(url)
    try:
        return Repo.parse(found.group("slug")) if found else Repo.parse(url)
    except InputError:
        raise GitHubError(f"remote {remote} ({url}) is not a GitHub repository (owner/name)") from None


def push(worktree: Worktree, commit: str, remote: str) -> None:
    """Put ``commit`` on the remote's branch ``worktree.branch``: a fast-forward or
    nothing; raises ``GitError`` with git's words when the remote refuses."""
    at = in_repo(worktree)
    done = git.run(at, "push", "--porcelain", remote, f"{commit}:refs/heads/{worktree.branch}", check=False)
    if done.returncode != 0:
        raise GitError(f"git push to {remote} refused branch {worktree.branch}: {git.last_words(done)}")


def pull_body(task: Task, checks: Sequence[CheckResult]) -> str:
    """The pull request's text: the agent's summary, the checks that passed, and
    ``Closes #N`` when the task came from an issue."""
    parts = [task.result_summary.strip() if task.result_summary else f"Vigil task #{task.id}: {task.subject}"]
    passed = [c.label for c in checks if c.passed]
    if passed:
        parts.append("Checks that passed:\n" + "\n".join(f"- `{label}`" for label in passed))
    if task.github is not None and task.github.issue is not None:
        parts.append(f"Closes #{task.github.issue}")
    parts.append(f"Made by Vigil (task #{task.id}), reviewed and approved by its operator.")
    return "\n\n".join(parts)


async def publish(
    task: Task, worktree: Worktree, commit: str, checks: Sequence[CheckResult], settings: GitHubSettings
) -> Published:
    """Push ``commit`` and find or open the pull request for it. Raises ``GitError``
    (the push was refused) or ``GitHubError`` (no token, GitHub refused): nothing is
    recorded then, and calling it again is safe."""
    import asyncio

    from githubkit.exception import RequestFailed

    repo = await asyncio.to_thread(repo_of, task, worktree, settings.remote)
    await asyncio.to_thread(push, worktree, commit, settings.remote)
    secret = await asyncio.to_thread(token, settings.token_env)
    try:
        async with client(secret, settings.api_url) as gh:
            found, opened = await _find_or_open(gh, repo, task, worktree, checks)
    except RequestFailed as err:
        raise GitHubError(
            f"GitHub refused the pull request from {worktree.branch} to {repo}: "
            f"HTTP {err.response.status_code} {_message(err)}"
        ) from None
    base = task.github or GitHubLink(repo=str(repo))
    link = replace(base, pull=found.number, pull_url=found.html_url, branch=worktree.branch)
    return Published(link, opened)


async def _find_or_open(
    gh: Any, repo: Repo, task: Task, worktree: Worktree, checks: Sequence[CheckResult]
) -> tuple[Any, bool]:
    listed = await gh.rest.pulls.async_list(
        repo.owner, repo.name, state="open", head=f"{repo.owner}:{worktree.branch}", per_page=10
    )
    for pull in listed.parsed_data:
        if pull.head.ref == worktree.branch:
            return pull, False
    created = await gh.rest.pulls.async_create(
        repo.owner,
        repo.name,
        title=task.subject[:250],
        head=worktree.branch,
        base=worktree.base,
        body=pull_body(task, checks),
    )
    return created.parsed_data, True


def _message(err: Any) -> str:
    try:
        said = err.response.json()
    except ValueError:
        return ""
    if not isinstance(said, dict):
        return ""
    errors = said.get("errors")
    details = "; ".join(str(e.get("message", e)) for e in errors if isinstance(e, dict)) if errors else ""
    return ": ".join(str(part) for part in (said.get("message"), details) if part)
