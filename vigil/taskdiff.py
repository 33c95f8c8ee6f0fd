"""What a person reviews: the task's artifact against its base (docs/coding.md).

The diff is made in a view of Vigil's own that borrows the operator's objects
(``vigil.objectview``): no configuration, ``.gitattributes`` or ``info/attributes``
of any repository changes it, every file is shown as text, with no textconv or
external diff program (``git.REVIEW_DIFF``). It runs from the commit where the
artifact and the base last met (once merged, the base as it was then) to the
artifact (once merged, what the base then pointed to): exactly the change an
approval of ``until`` lands. The patch is a plain string, as git printed it; the
caller neutralises control characters for display.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vigil import git
from vigil.clones import adopted
from vigil.codework import Worktree
from vigil.errors import RepositoryError, VigilError
from vigil.flags import Flag, flagged
from vigil.objectview import object_view


@dataclass(frozen=True, slots=True)
class TaskDiff:
    """A task's change: ``since..until`` in its repository, file by file, the
    files to look at first (``flags``) and the patch (empty unless asked for)."""

    worktree: Worktree
    since: str
    until: str
    files: tuple[git.FileChange, ...]
    flags: tuple[Flag, ...]
    patch: str

    @property
    def added(self) -> int:
        return sum(f.added or 0 for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed or 0 for f in self.files)

    @property
    def empty(self) -> bool:
        return not self.files


def reviewed_commit(worktree: Worktree) -> str:
    """The commit the task's diff runs to: what the base pointed to after a merge,
    else the artifact, else (no attempt left one yet) where the task started."""
    return worktree.merged or worktree.artifact or worktree.start


def task_diff(worktree: Worktree, *, with_patch: bool = True) -> TaskDiff:
    """The task's diff (what an approval merges; after a merge, what it merged).
    Raises ``RepositoryError`` when the repository or the commit is gone,
    ``GitError`` when git fails."""
    top, git_dir = git.repository_of(Path(worktree.repo))
    at = git.Checkout(top)
    worktree = adopted(worktree)
    until = reviewed_commit(worktree)
    if git.commit_of(at, until) is None:
        raise RepositoryError(f"the task's commit {until[:12]} no longer exists in {top}")
    if worktree.merged_from is not None:
        since = worktree.merged_from
    else:
        since = git.merge_base(at, f"refs/heads/{worktree.base}", until) or worktree.start
    with object_view(git_dir / "objects") as view:
        files = tuple(git.numstat(view, since, until))
        flags = flagged(view, since, until)
        patch = git.patch(view, since, until) if with_patch else ""
    return TaskDiff(worktree, since, until, files, flags, patch)


def flags_of(worktree: Worktree | None) -> tuple[Flag, ...]:
    """The files of a task's change a person must look at first: none when it has
    no repository, or the repository cannot be read now."""
    if worktree is None:
        return ()
    try:
        return task_diff(worktree, with_patch=False).flags
    except VigilError:
        return ()
