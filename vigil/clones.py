"""A task's repository: a clone of its own for each attempt, and the result Vigil
takes out of it (docs/coding.md).

**The agent works on a repository of its own.** Before each attempt Vigil makes a
fresh clone of the operator's repository at ``work/<task id>`` in the home
(``git clone --shared --no-checkout``: the clone borrows the operator's objects
read-only through ``objects/info/alternates``, so a large repository costs a few
files; then the task's branch is checked out). The clone's ``.git`` is the agent's
to write; nothing of the operator's repository is writable from either CLI's
sandbox. Vigil runs git in the clone only while it is fresh, before the agent
starts; the folder an earlier attempt left is thrown away first (its work was
taken out when that attempt ended).

**What the agent left is data.** When the attempt ends, Vigil reads the clone's
``HEAD`` as a file (``read_head``: a commit id, or a ``ref:`` to a loose or packed
ref of the clone; no ``commondir``, no configuration), then, in a scratch
repository of its own that borrows the operator's and the clone's objects
(``vigil.objectview``), adds whatever the agent left uncommitted on top of that
commit (its own index, no filter, hook or monitor can run) and fetches the result
into the operator's repository as ``refs/vigil/tasks/<task id>``: the task's
**artifact**, recorded on the task with the base it applies to. A result that does
not descend from the commit the task started from is not taken (the person is told;
the artifact stays as it was). Whatever branch the agent ended on, its ``HEAD`` is
what counts.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from vigil import git
from vigil.codework import RunChanges, Worktree
from vigil.errors import GitError, RepositoryError
from vigil.objectview import object_view

SLUG_CHARS = 40  # of the subject, in the branch name
BRANCH_PREFIX = "vigil/"
TASK_REF_PREFIX = "refs/vigil/tasks/"
INCOMING_REF_PREFIX = "refs/vigil/incoming/"  # a run's result, fetched but not yet accepted
HEAD_DEPTH = 5  # symbolic refs followed when reading the clone's HEAD
_SHA = re.compile(r"[0-9a-f]{40}")
_REF = re.compile(r"refs/[A-Za-z0-9._/+-]+")


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


def task_ref(task_id: int) -> str:
    """``refs/vigil/tasks/<task id>``: where the task's artifact is kept."""
    return f"{TASK_REF_PREFIX}{task_id}"


def in_repo(worktree: Worktree) -> git.Checkout:
    """The operator's repository, where Vigil runs git with its own configuration."""
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


def make_clone(
    repo: Path, path: Path, *, task_id: int, subject: str, base: str | None, start_commit: str | None = None
) -> Worktree:
    """Make the task's clone at ``path``, on its branch from the base's tip (from
    ``start_commit`` instead, a parent's artifact, when the repository has it).
    Raises ``RepositoryError`` as ``resolve_base`` does, ``GitError`` when git
    fails."""
    top, git_dir, base = resolve_base(repo, base)
    at = git.Checkout(top)
    start = git.commit_of(at, f"refs/heads/{base}")
    if start_commit is not None and git.commit_of(at, start_commit) is not None:
        start = start_commit
    assert start is not None  # resolve_base checked the base
    # A name another home on the same repository took (its task of the same id)
    # gets a suffix: the branch an approval may make, and the ref of the change.
    branch, ref, suffix = branch_name(task_id, subject), task_ref(task_id), 1
    while git.branch_exists(at, branch) or git.commit_of(at, ref) is not None:
        suffix += 1
        branch, ref = f"{branch_name(task_id, subject)}-{suffix}", f"{task_ref(task_id)}-{suffix}"
    _fresh_clone(top, path, branch, start)
    return Worktree(repo=str(top), git_dir=str(git_dir), path=str(path), branch=branch, base=base, start=start, ref=ref)


def adopted(worktree: Worktree) -> Worktree:
    """A task whose workspace was a git worktree (before clones: no ``ref``) as a
    clone's: its branch's tip as its artifact, kept on the task's ref from now on
    (its id is its workspace folder's name). Others as they are."""
    if worktree.ref is not None or worktree.artifact is not None:
        return worktree
    at = git.Checkout(Path(worktree.repo))
    tip = git.commit_of(at, f"refs/heads/{worktree.branch}") if at.path.is_dir() else None
    name = Path(worktree.path).name
    return replace(worktree, artifact=tip, ref=task_ref(int(name)) if name.isdigit() else None)


def renew_clone(worktree: Worktree) -> Worktree:
    """Before another attempt: a fresh clone at the task's artifact (at its start
    when it has none yet), whatever the last attempt left in the folder. Raises
    ``RepositoryError`` when the repository or that commit is gone."""
    worktree = adopted(worktree)
    top, git_dir = git.repository_of(Path(worktree.repo))
    tip = worktree.artifact or worktree.start
    if git.commit_of(git.Checkout(top), tip) is None:
        raise RepositoryError(f"the task's commit {tip[:12]} no longer exists in {top}")
    _fresh_clone(top, Path(worktree.path), worktree.branch, tip)
    return replace(worktree, repo=str(top), git_dir=str(git_dir))


def _fresh_clone(top: Path, path: Path, branch: str, commit: str) -> None:
    """A new clone of ``top`` at ``path`` with ``branch`` checked out at ``commit``
    and the repository's user as its own (so the agent's commits carry it)."""
    discard(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    made = git.Checkout(path.parent, isolated=True)
    git.run(made, "clone", "--quiet", "--shared", "--no-checkout", "--", str(top), str(path))
    clone = git.Checkout(path, git_dir=path / ".git", work_tree=path, isolated=True)
    git.run(clone, "checkout", "--quiet", "-b", branch, commit)
    operator = git.Checkout(top)
    for key in ("user.name", "user.email"):
        value = git.run(operator, "config", "--get", key, check=False).stdout.strip()
        if value:
            git.run(clone, "config", key, value)


def retire(worktree: Worktree) -> None:
    """Once its attempt is over (its work taken, its checks run): the clone's git
    folder goes, so that the folder left for a person to look at is files only,
    not a repository whose configuration (the agent's) a ``git status`` there
    would obey. The next attempt gets a fresh clone."""
    discard(Path(worktree.path) / ".git")


def discard(path: Path) -> None:
    """Remove ``path`` whatever an agent left in it (read-only folders included; a
    symbolic link is removed, never followed): moved aside at once, then deleted."""
    if not path.exists() and not path.is_symlink():
        return
    aside = path.with_name(f".discarded-{path.name}-{uuid.uuid4().hex[:8]}")
    path.rename(aside)
    if aside.is_symlink() or not aside.is_dir():
        aside.unlink()
        return

    def writable_again(_function: object, name: str, _: object) -> None:
        os.chmod(os.path.dirname(name), 0o700)  # a folder the agent made read-only
        if os.path.isdir(name) and not os.path.islink(name):
            os.chmod(name, 0o700)
            shutil.rmtree(name, ignore_errors=True)
        else:
            os.unlink(name)

    shutil.rmtree(aside, onerror=writable_again)


def read_head(git_dir: Path) -> str | None:
    """The commit id the clone's ``HEAD`` names, read as data: a commit id, or a
    ``ref:`` to a ref of the clone, loose or packed (symbolic refs followed a few
    levels). None when it names nothing readable, or a file is a symbolic link."""
    if git_dir.is_symlink() or not git_dir.is_dir():
        return None
    text = _small_file(git_dir / "HEAD")
    for _ in range(HEAD_DEPTH):
        if text is None:
            return None
        if _SHA.fullmatch(text):
            return text
        name = text.removeprefix("ref:").strip() if text.startswith("ref:") else None
        if name is None or not _REF.fullmatch(name) or ".." in name or "//" in name:
            return None
        text = _small_file(git_dir / name) or _packed(git_dir / "packed-refs", name)
    return None


def _small_file(path: Path) -> str | None:
    """The first line of a regular file (not a link), stripped; None otherwise."""
    try:
        if path.is_symlink() or not path.is_file():
            return None
        with path.open("rb") as handle:
            first = handle.read(4096).split(b"\n", 1)[0]
    except OSError:
        return None
    return first.decode("ascii", errors="replace").strip()


def _packed(path: Path, name: str) -> str | None:
    if path.is_symlink() or not path.is_file():
        return None
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        sha, _, ref = line.partition(" ")
        if ref == name and _SHA.fullmatch(sha):
            return sha
    return None


@dataclass(frozen=True, slots=True)
class Settled:
    """What one attempt left: ``changes`` (its commits, the artifact's diff stat;
    None when nothing could be read), ``artifact`` the task's artifact now
    (unchanged when the run's work was not taken), ``problem`` what a person must
    hear about (work not taken, a ``HEAD`` that names nothing); None when all went
    as it should."""

    changes: RunChanges | None
    artifact: str
    problem: str | None


def settle(worktree: Worktree, before: str, message: str) -> Settled:
    """After an attempt that started at commit ``before``: take what the agent left
    in its clone (``HEAD``, and on top of it what it left uncommitted, committed
    with ``message``) as the task's artifact. Raises ``RepositoryError`` when the
    operator's repository is gone, ``GitError`` when git fails."""
    top, git_dir = git.repository_of(Path(worktree.repo))
    at = git.Checkout(top)
    clone = Path(worktree.path)
    clone_git = clone / ".git"
    head = read_head(clone_git)
    borrowed = [git_dir / "objects"]
    if head is not None:
        borrowed.append(clone_git / "objects")
    problems: list[str] = []
    with object_view(*borrowed, work_tree=clone if clone.is_dir() else None) as view:
        if head is not None and git.run(view, "cat-file", "-e", f"{head}^{{commit}}", check=False).returncode != 0:
            head = None
        if head is None:
            problems.append(f"the workspace's HEAD names no commit Vigil could read; taken on top of {before[:12]}")
            head = before
        result, dirty = head, False
        if view.work_tree is not None:
            try:
                result, dirty = _commit_left(view, head, message, git.identity_of(at))
            except GitError as err:
                problems.append(f"what the agent left uncommitted could not be taken: {err}")
        git.run(view, "update-ref", "refs/heads/result", result)
        incoming = f"{INCOMING_REF_PREFIX}{(worktree.ref or worktree.branch).removeprefix(TASK_REF_PREFIX)}"
        fetch = ("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-gc", "--no-recurse-submodules")
        git.run(at, "-c", "fetch.fsckObjects=true", *fetch, str(view.git_dir), f"+refs/heads/result:{incoming}")
    try:
        if git.is_ancestor(at, worktree.start, result):
            artifact = result
        else:
            artifact = before
            problems.append(
                f"the workspace's HEAD ({result[:12]}) does not descend from {worktree.base} at "
                f"{worktree.start[:12]}: the run's work was not taken"
            )
        if worktree.ref is not None:
            git.run(at, "update-ref", "-m", "vigil: the task's artifact", worktree.ref, artifact)
    finally:
        git.run(at, "update-ref", "-d", incoming, check=False)
    since = git.merge_base(at, f"refs/heads/{worktree.base}", artifact) or worktree.start
    files = git.numstat(at, since, artifact) if artifact != since else []
    changes = RunChanges(
        branch=worktree.branch,
        head=artifact,
        commits=tuple(git.commits_between(at, before, artifact)),
        files=len(files),
        insertions=sum(f.added or 0 for f in files),
        deletions=sum(f.removed or 0 for f in files),
        dirty=dirty and artifact == result,
    )
    return Settled(changes, artifact, "; ".join(problems) or None)


def _commit_left(view: git.Checkout, head: str, message: str, identity: dict[str, str]) -> tuple[str, bool]:
    """``head`` with the view's work tree (the clone's files, ``.gitignore``
    respected) committed on top when they differ from it; and whether they did."""
    env = {"GIT_INDEX_FILE": str(Path(str(view.git_dir)) / "vigil-index"), **identity}
    git.run(view, "read-tree", head, extra_env=env)
    git.run(view, "add", "--all", "--", ".", extra_env=env)
    tree = git.run(view, "write-tree", extra_env=env).stdout.strip()
    if tree == git.out(view, "rev-parse", f"{head}^{{tree}}"):
        return head, False
    return git.run(view, "commit-tree", tree, "-p", head, "-m", message, extra_env=env).stdout.strip(), True


def remove_clone(worktree: Worktree, *, delete_ref: bool) -> None:
    """Remove the task's clone (whatever it holds); with ``delete_ref``, its
    artifact's ref too. A repository that is gone leaves only the folder to
    delete. Raises ``GitError`` when git refuses."""
    discard(Path(worktree.path))
    if not delete_ref or worktree.ref is None:
        return
    try:
        top, _ = git.repository_of(Path(worktree.repo))
    except RepositoryError:
        return
    git.run(git.Checkout(top), "update-ref", "-d", worktree.ref, check=False)
