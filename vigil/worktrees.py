"""A task's git worktree: made before its first run, reused by its retries, summed
up after each run, shown as a diff, removed by retention (docs/coding.md).

A task that works on a repository gets a worktree of it at ``work/<task id>`` in
the home, on a branch of its own, ``vigil/<task id>-<slug>``, started from its
base (the repository's current branch unless ``base`` names one) or, for a
follow-up, from its parent's branch. Every git call goes through ``vigil.git``,
which names the worktree's git folders as recorded here rather than as the
worktree (which the agent writes) says.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from vigil import git
from vigil.codework import RunChanges, Worktree
from vigil.errors import GitError, RepositoryError

SLUG_CHARS = 40  # of the subject, in the branch name
BRANCH_PREFIX = "vigil/"


def branch_name(task_id: int, subject: str) -> str:
    """``vigil/<task id>-<slug>``: the subject in lowercase words joined by ``-``,
    cut at a word near ``SLUG_CHARS``; ``vigil/<task id>`` when no word is left."""
    words = re.findall(r"[a-z0-9]+", subject.lower())
    slug = ""
    for word in words:
        if len(slug) + len(word) + 1 > SLUG_CHARS:
            break
        slug = f"{slug}-{word}" if slug else word
    return f"{BRANCH_PREFIX}{task_id}-{slug}" if slug else f"{BRANCH_PREFIX}{task_id}"


def in_worktree(worktree: Worktree) -> git.Checkout:
    """The worktree as git should see it: its git folders named, not looked up."""
    return git.Checkout(Path(worktree.path), Path(worktree.admin), Path(worktree.git_dir))


def in_repo(worktree: Worktree) -> git.Checkout:
    return git.Checkout(Path(worktree.repo))


def resolve_base(repo: Path, base: str | None) -> tuple[Path, Path, str]:
    """The repository's top folder, its git folder and the base branch: ``base``, or
    the branch checked out in ``repo``. Raises ``RepositoryError`` when the
    repository is missing or not one, the base does not exist, or no base is given
    and the repository's HEAD is detached."""
    top, git_dir = git.repository_of(repo)
    at = git.Checkout(top)
    if base is None:
        base = git.current_branch(at)
        if base is None:
            raise RepositoryError(f'{top}: HEAD is detached; name the branch to start from (base = "main")')
    elif not git.branch_exists(at, base):
        raise RepositoryError(f"base branch {base!r} does not exist in {top}")
    if git.commit_of(at, f"refs/heads/{base}") is None:
        raise RepositoryError(f"base branch {base!r} of {top} has no commits yet")
    return top, git_dir, base


def make_worktree(
    repo: Path, path: Path, *, task_id: int, subject: str, base: str | None, start_branch: str | None = None
) -> Worktree:
    """Make the task's worktree at ``path`` on a new branch from its base (from
    ``start_branch`` instead, a parent's branch, when it still exists). A branch name
    another home already took gets a suffix (``-2``). Raises ``RepositoryError`` as
    ``resolve_base`` does, or when ``path`` is taken; ``GitError`` when git fails."""
    top, git_dir, base = resolve_base(repo, base)
    at = git.Checkout(top)
    start_ref = f"refs/heads/{base}"
    if start_branch is not None and git.branch_exists(at, start_branch):
        start_ref = f"refs/heads/{start_branch}"
    start = git.commit_of(at, start_ref)
    assert start is not None  # resolve_base checked the base; the start branch exists
    wanted = branch_name(task_id, subject)
    branch, suffix = wanted, 1
    while git.branch_exists(at, branch):
        suffix += 1
        branch = f"{wanted}-{suffix}"
    if path.exists() and any(path.iterdir()):
        raise RepositoryError(f"cannot make the worktree: {path} exists and is not empty")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    git.run(at, "worktree", "add", "--quiet", "-b", branch, str(path), start)
    return Worktree(
        repo=str(top),
        git_dir=str(git_dir),
        admin=str(_admin_of(path)),
        path=str(path),
        branch=branch,
        base=base,
        start=start,
    )


def _admin_of(path: Path) -> Path:
    """The worktree's own folder in the repository's git folder, as its ``.git``
    file says right after git made it (nothing else has touched it yet)."""
    text = (path / ".git").read_text(encoding="utf-8").strip()
    return Path(text.removeprefix("gitdir:").strip()).resolve()


def reuse_worktree(worktree: Worktree) -> Worktree:
    """The task's worktree, ready for another run: as it is, or made again from its
    branch when its folder is gone (retention removed it, or a person did). Raises
    ``RepositoryError`` when the repository or the branch is gone."""
    path = Path(worktree.path)
    if (path / ".git").exists() and Path(worktree.admin).is_dir():
        return worktree
    top, _ = git.repository_of(Path(worktree.repo))
    at = git.Checkout(top)
    if not git.branch_exists(at, worktree.branch):
        raise RepositoryError(f"the task's branch {worktree.branch} no longer exists in {top}")
    git.run(at, "worktree", "prune")
    if path.exists() and not any(path.iterdir()):
        path.rmdir()
    if path.exists():
        raise RepositoryError(f"cannot make the worktree again: {path} exists and is not one")
    git.run(at, "worktree", "add", "--quiet", str(path), worktree.branch)
    return replace(worktree, admin=str(_admin_of(path)))


def writable_git_dirs(worktree: Worktree) -> tuple[Path, ...]:
    """What an agent's sandbox must let it write, besides the worktree, to commit
    on its branch: the worktree's own git folder, the object store, and the folders
    of its branch's ref and reflog (``refs/heads/vigil`` …: the other ``vigil/``
    branches are there too). Not the repository's configuration, hooks, other
    refs or packed refs."""
    git_dir = Path(worktree.git_dir)
    folder = Path(worktree.branch).parent
    return (
        Path(worktree.admin),
        git_dir / "objects",
        git_dir / "refs" / "heads" / folder,
        git_dir / "logs" / "refs" / "heads" / folder,
    )


@dataclass(frozen=True, slots=True)
class Tips:
    """The branch's and the base's commits at one moment (before a run)."""

    branch: str
    base: str | None


def tips(worktree: Worktree) -> Tips:
    at = in_repo(worktree)
    branch = git.commit_of(at, f"refs/heads/{worktree.branch}")
    if branch is None:
        raise RepositoryError(f"the task's branch {worktree.branch} no longer exists in {worktree.repo}")
    return Tips(branch, git.commit_of(at, f"refs/heads/{worktree.base}"))


def settle(worktree: Worktree, before: Tips, message: str) -> tuple[RunChanges, str | None]:
    """After a run: commit what the agent left uncommitted (``message``), then what
    the run added to the branch and the branch's diff stat against its base. Also
    returns a denial when the base branch was moved during the run onto the
    branch's own commits (the agent merged itself past review); None otherwise.
    Raises ``GitError`` when git fails."""
    left = git.dirty(in_worktree(worktree))
    if left:
        git.commit_everything(in_worktree(worktree), message)
    now = tips(worktree)
    at = in_repo(worktree)
    since = _diff_base(worktree, now.branch)
    files = git.numstat(at, since, now.branch)
    changes = RunChanges(
        branch=worktree.branch,
        head=now.branch,
        commits=tuple(git.commits_between(at, before.branch, now.branch)),
        files=len(files),
        insertions=sum(f.added or 0 for f in files),
        deletions=sum(f.removed or 0 for f in files),
        dirty=left,
    )
    moved = None
    if (
        now.base is not None
        and now.base != before.base
        and now.branch != worktree.start
        and git.is_ancestor(at, now.branch, now.base)
    ):
        moved = f"git: {worktree.base} was moved during the run to {now.base[:12]}, onto this task's own commits"
    return changes, moved


def _diff_base(worktree: Worktree, head: str) -> str:
    """Where the task's diff starts: once merged, the base as it was then; else
    where the branch and the base last met (the base may have moved on)."""
    if worktree.merged_from is not None:
        return worktree.merged_from
    return git.merge_base(in_repo(worktree), f"refs/heads/{worktree.base}", head) or worktree.start


@dataclass(frozen=True, slots=True)
class BranchDiff:
    """A task's changes: ``since..until`` in its repository, file by file, and the
    patch (empty unless asked for)."""

    worktree: Worktree
    since: str
    until: str
    files: tuple[git.FileChange, ...]
    patch: str

    @property
    def added(self) -> int:
        return sum(f.added or 0 for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed or 0 for f in self.files)


def branch_diff(worktree: Worktree, *, with_patch: bool = True) -> BranchDiff:
    """The task's diff against its base: what an approval merges (after a merge,
    what it merged). Raises ``RepositoryError`` when the repository or the branch is
    gone, ``GitError`` when git fails."""
    top, _ = git.repository_of(Path(worktree.repo))
    at = git.Checkout(top)
    until = worktree.merged or git.commit_of(at, f"refs/heads/{worktree.branch}")
    if until is None:
        raise RepositoryError(f"the task's branch {worktree.branch} no longer exists in {top}")
    since = _diff_base(worktree, until)
    files = tuple(git.numstat(at, since, until))
    return BranchDiff(worktree, since, until, files, git.patch(at, since, until) if with_patch else "")


def remove_worktree(worktree: Worktree, *, delete_branch: bool) -> None:
    """Remove the task's worktree folder (its uncommitted changes with it) and
    tell the repository; with ``delete_branch``, its branch too. A repository
    that is gone leaves only the folder to delete. Raises ``GitError`` when git
    refuses."""
    path = Path(worktree.path)
    try:
        top, _ = git.repository_of(Path(worktree.repo))
    except RepositoryError:
        shutil.rmtree(path, ignore_errors=True)
        return
    at = git.Checkout(top)
    if path.exists():
        proc = git.run(at, "worktree", "remove", "--force", "--force", str(path), check=False)
        if proc.returncode != 0:
            shutil.rmtree(path, ignore_errors=True)
    git.run(at, "worktree", "prune")
    if delete_branch and git.branch_exists(at, worktree.branch):
        try:
            git.run(at, "branch", "-D", worktree.branch)
        except GitError:
            if git.checked_out_at(at, worktree.branch) is None:
                raise
