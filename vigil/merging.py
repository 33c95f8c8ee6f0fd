"""Landing an approved task's artifact on its base (``merge = "ff" | "merge" |
"squash" | "branch"``; docs/coding.md, *Review and merge*).

The merge is made with plumbing, in the operator's repository, without touching
any checkout: ``ff`` takes the artifact itself (only when the base has not moved
on since the task started), ``merge`` a merge commit of the base and the artifact,
``squash`` one commit with the artifact's changes on the base (both from ``git
merge-tree --write-tree`` and ``commit-tree``); ``branch`` moves no base and puts
the artifact on the task's branch ``vigil/<id>-<slug>`` for a pull request.

``plan`` makes the commit and returns a ``Landing``; ``land`` then moves the base
with one ``update-ref <base> <new> <old>`` (refused when the base moved
meanwhile): the one step that changes what the base is, so a kill at any moment
leaves it before or after. Where the base is checked out (the operator's own
folder), that checkout must have no uncommitted change to a tracked file before,
and is brought to the new commit after (``read-tree -m -u``, which keeps untracked
files and refuses to overwrite a change): never a ``MERGE_HEAD``, a conflict marker
or a staged squash in it. A conflict changes nothing and says which files
conflict, for the agent to resolve on its branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vigil import git
from vigil.clones import in_repo
from vigil.codework import Worktree
from vigil.errors import GitError


@dataclass(frozen=True, slots=True)
class Merged:
    """The base now points at ``commit``; ``since`` is where it pointed before (for
    ``branch``: where the artifact and the base met, and ``commit`` the artifact).
    ``warning``: the base moved but its checkout could not follow (why, and what
    to do)."""

    commit: str
    since: str
    mode: str
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class Conflict:
    """The artifact cannot be merged as it is: ``files`` conflict (none for a base
    that moved on under ``ff``); ``what`` says so, in words for the agent."""

    files: tuple[str, ...]
    what: str


@dataclass(frozen=True, slots=True)
class Unchanged:
    """Nothing to merge: the task's change is empty (``what`` says so)."""

    what: str


@dataclass(frozen=True, slots=True)
class Landing:
    """A merge made but not landed: ``ref`` (the base's, or the task's branch for
    ``branch``) is to move from ``old`` (None: it must not exist) to ``new``;
    ``since`` is the commit the reviewed diff started from, ``artifact`` the
    commit reviewed."""

    mode: str
    ref: str
    old: str | None
    new: str
    since: str
    artifact: str

    def intent(self) -> str:
        """As kept on the task while it lands (``Worktree.merging``)."""
        return f"{self.mode} {self.ref} {self.old or '-'} {self.new} {self.since} {self.artifact}"

    @classmethod
    def from_intent(cls, text: str) -> Landing:
        mode, ref, old, new, since, artifact = text.split(" ")
        return cls(mode, ref, None if old == "-" else old, new, since, artifact)


def plan(worktree: Worktree, artifact: str, mode: str, message: str) -> Landing | Merged | Conflict | Unchanged:
    """The merge of ``artifact`` into the task's base as ``mode`` says, made but not
    landed (``Merged``: already in the base, nothing to do). Raises ``GitError``
    when the base is gone or git fails."""
    at = in_repo(worktree)
    base_ref = f"refs/heads/{worktree.base}"
    base_tip = git.commit_of(at, base_ref)
    if base_tip is None:
        raise GitError(f"cannot merge: branch {worktree.base} no longer exists in {worktree.repo}")
    since = git.merge_base(at, base_tip, artifact) or worktree.start
    if mode != "branch" and artifact != worktree.start and artifact == since:
        return Merged(base_tip, base_tip, mode)  # already in the base: nothing to do
    if git.out(at, "rev-parse", f"{since}^{{tree}}") == git.out(at, "rev-parse", f"{artifact}^{{tree}}"):
        return Unchanged(f"nothing to merge: the task's change against {worktree.base} is empty")
    if mode == "branch":
        ref = f"refs/heads/{worktree.branch}"
        return Landing(mode, ref, git.commit_of(at, ref), artifact, since, artifact)
    if mode == "ff":
        if not git.is_ancestor(at, base_tip, artifact):
            return Conflict(
                (),
                f"{worktree.base} has moved on since the task started, so it cannot be fast-forwarded: "
                f"bring your branch up to date with {worktree.base} (git fetch origin, then rebase it onto "
                f"origin/{worktree.base}), keep the checks passing, and end your run",
            )
        return Landing(mode, base_ref, base_tip, artifact, since, artifact)
    merged = git.run(
        at, "merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", base_tip, artifact, check=False
    )
    if merged.returncode not in (0, 1):
        raise GitError(f"git merge-tree in {worktree.repo}: {git.last_words(merged)}")
    tree, *files = [field for field in merged.stdout.split("\0") if field]
    if merged.returncode == 1:
        listed = ", ".join(files) if files else "(git named no file)"
        return Conflict(
            tuple(files),
            f"merging your branch into {worktree.base} conflicts in: {listed}. Fetch it (git fetch origin), "
            f"merge origin/{worktree.base} into your branch (or rebase onto it), resolve those conflicts, "
            "commit, keep the checks passing, and end your run",
        )
    parents = ("-p", base_tip) if mode == "squash" else ("-p", base_tip, "-p", artifact)
    identity = git.identity_env(at)
    commit = git.run(at, "commit-tree", tree, *parents, "-m", message, extra_env=identity).stdout.strip()
    return Landing(mode, base_ref, base_tip, commit, since, artifact)


def landed(worktree: Worktree, landing: Landing) -> bool:
    """Whether ``landing``'s ref already points at (or past) its new commit."""
    at = in_repo(worktree)
    now = git.commit_of(at, landing.ref)
    return now is not None and (now == landing.new or git.is_ancestor(at, landing.new, now))


def checkout_problem(worktree: Worktree, landing: Landing) -> str | None:
    """Why the base's checkout stops the landing: it has uncommitted changes to
    tracked files (a person's own work, which only they may commit or discard);
    None when there is no checkout of it or it is clean."""
    if landing.mode == "branch":
        return None
    where = git.checked_out_at(in_repo(worktree), worktree.base)
    if where is None or not git.dirty(git.Checkout(where), untracked=False):
        return None
    return (
        f"{worktree.base} is checked out at {where} with uncommitted changes to tracked files: commit them on "
        f"{worktree.base} yourself, or discard them, then approve again; nothing was merged"
    )


def land(worktree: Worktree, landing: Landing) -> Merged:
    """Move the ref (refused when it moved since the plan: ``GitError``), then bring
    the base's checkout, if any, to the new commit. Done again after a cut-short
    ``land``, it finishes what is left."""
    at = in_repo(worktree)
    if not landed(worktree, landing):
        git.run(at, "update-ref", "-m", f"vigil: {landing.mode} task", landing.ref, landing.new, landing.old or "")
    if landing.mode == "branch":
        return Merged(landing.new, landing.since, landing.mode)
    return Merged(landing.new, landing.old or landing.since, landing.mode, _follow(worktree, landing))


def _follow(worktree: Worktree, landing: Landing) -> str | None:
    """Bring the base's checkout from ``old`` to ``new``; a warning when it cannot."""
    where = git.checked_out_at(in_repo(worktree), worktree.base)
    if where is None or landing.old is None:
        return None
    place = git.Checkout(Path(where))
    synced = git.run(place, "diff-index", "--cached", "--quiet", landing.new, "--", check=False).returncode == 0
    if synced and not git.dirty(place, untracked=False):
        return None  # already there
    proc = git.run(place, "read-tree", "-m", "-u", landing.old, landing.new, check=False)
    if proc.returncode == 0:
        return None
    return (
        f"{worktree.base} is at {landing.new[:12]}, but its checkout at {where} could not follow "
        f"({git.last_words(proc)}); `git -C {where} status` shows what differs from it"
    )
