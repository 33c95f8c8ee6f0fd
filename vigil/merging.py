"""Merging an approved task's branch into its base (``merge = "ff" | "merge" |
"squash" | "branch"``; docs/coding.md, *Review and merge*).

``ff`` moves the base to the branch (only when the base has not moved on since),
``merge`` makes a merge commit, ``squash`` one commit with the branch's changes;
``branch`` merges nothing and leaves the branch for a person (a pull request).

Where the base is checked out (usually the repository's own folder), the merge
happens there, as a person would do it, and is refused while that checkout has
uncommitted changes to tracked files. Elsewhere it happens in a throwaway worktree
and the base is then moved only if it still points where it did (so a commit
someone made meanwhile is never lost). A conflict leaves everything as it was and
says which files conflict, for the agent to resolve on its branch.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vigil import git
from vigil.codework import Worktree
from vigil.errors import GitError
from vigil.worktrees import in_repo


@dataclass(frozen=True, slots=True)
class Merged:
    """The base now points at ``commit``; ``since`` is where it pointed before (for
    ``branch``: where the branch and the base met, and ``commit`` the branch's tip)."""

    commit: str
    since: str
    mode: str


@dataclass(frozen=True, slots=True)
class Conflict:
    """The branch cannot be merged as it is: ``files`` conflict (none for a base that
    moved on under ``ff``); ``what`` says so, in words for the agent."""

    files: tuple[str, ...]
    what: str


def merge_branch(worktree: Worktree, mode: str, message: str) -> Merged | Conflict:
    """Merge the task's branch into its base as ``mode`` says, with ``message`` for a
    commit it makes. Raises ``GitError`` when the base's checkout has uncommitted
    changes, the base or the branch is gone, or git fails otherwise."""
    at = in_repo(worktree)
    base_ref, base = f"refs/heads/{worktree.base}", worktree.base
    base_tip = git.commit_of(at, base_ref)
    tip = git.commit_of(at, f"refs/heads/{worktree.branch}")
    if base_tip is None or tip is None:
        gone = base if base_tip is None else worktree.branch
        raise GitError(f"cannot merge: branch {gone} no longer exists in {worktree.repo}")
    if mode == "branch":
        return Merged(tip, git.merge_base(at, base_tip, tip) or worktree.start, mode)
    if git.is_ancestor(at, tip, base_tip):
        return Merged(base_tip, base_tip, mode)  # already in the base: nothing to do
    where = git.checked_out_at(at, base)
    if where is not None:
        place = git.Checkout(where)
        if git.dirty(place, untracked=False):
            raise GitError(
                f"{base} is checked out at {where} with uncommitted changes; commit or stash them, then approve again"
            )
        result = _merge_in(place, worktree, mode, tip, message)
        return result if isinstance(result, Conflict) else Merged(result, base_tip, mode)
    scratch = Path(tempfile.mkdtemp(prefix="vigil-merge-"))
    try:
        git.run(at, "worktree", "add", "--quiet", "--detach", str(scratch / "tree"), base_tip)
        result = _merge_in(git.Checkout(scratch / "tree"), worktree, mode, tip, message)
        if isinstance(result, Conflict):
            return result
        # only if the base still points where it did: a commit made meanwhile stays
        git.run(at, "update-ref", "-m", f"vigil: {message}", base_ref, result, base_tip)
        return Merged(result, base_tip, mode)
    finally:
        git.run(at, "worktree", "remove", "--force", "--force", str(scratch / "tree"), check=False)
        shutil.rmtree(scratch, ignore_errors=True)
        git.run(at, "worktree", "prune", check=False)


def _merge_in(place: git.Checkout, worktree: Worktree, mode: str, tip: str, message: str) -> str | Conflict:
    """Merge commit ``tip`` into what ``place`` has checked out; the new commit, or
    the conflict (``place`` left as it was)."""
    identity = git.identity_env(place)
    if mode == "ff":
        if git.run(place, "merge", "--ff-only", "--quiet", tip, check=False).returncode != 0:
            return Conflict(
                (),
                f"{worktree.base} has moved on since {worktree.branch} started, so it cannot be fast-forwarded: "
                f"bring {worktree.branch} up to date with {worktree.base} (rebase it onto {worktree.base}), "
                "keep the checks passing, and end your run",
            )
        return git.out(place, "rev-parse", "HEAD")
    if mode == "merge":
        args: tuple[str, ...] = ("merge", "--no-ff", "--no-edit", "--quiet", "-m", message, tip)
    else:
        args = ("merge", "--squash", "--quiet", tip)
    if git.run(place, *args, check=False, extra_env=identity).returncode != 0:
        files = tuple(git.out(place, "diff", "--name-only", "--diff-filter=U").splitlines())
        git.run(place, "reset", "--merge", check=False)
        listed = ", ".join(files) if files else "(git named no file)"
        return Conflict(
            files,
            f"merging {worktree.branch} into {worktree.base} conflicts in: {listed}. Merge {worktree.base} into "
            f"{worktree.branch} (or rebase onto it), resolve those conflicts, commit, keep the checks passing, "
            "and end your run",
        )
    if mode == "squash":
        git.run(place, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", message, extra_env=identity)
    return git.out(place, "rev-parse", "HEAD")
