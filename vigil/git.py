"""The one way Vigil runs git, hardened against what an agent can write.

Vigil runs git outside any sandbox, so nothing an agent wrote may make that git run
a program or steer what it does. Vigil runs git only in repositories it controls:
the operator's repository (which no agent sandbox can write: docs/coding.md), the
clone it has just made for a task (before any agent ran in it), and scratch
repositories of its own that borrow objects read-only (``vigil.objectview``). The
agent's clone is never a repository Vigil runs git in once the agent has had it;
its objects and files are read as data. Every call here:

* turns hooks off (``core.hooksPath=/dev/null``), the file-system monitor
  (``core.fsmonitor=false``), automatic gc and maintenance, and never looks into
  submodules;
* reads no attributes file but the repository's own ``.gitattributes`` files
  (``core.attributesFile=/dev/null``, no system attributes);
* with ``Checkout.isolated`` (the repositories Vigil made), reads no system or
  user configuration either: only the repository's own, which Vigil wrote, so no
  filter, textconv or diff program is defined there;
* names its git folder and work tree itself (``GIT_DIR``, ``GIT_WORK_TREE``) where
  it has them, instead of letting git discover them;
* gets this process's environment without any ``GIT_*`` variable of its own, in
  the C locale, with prompts off (there is no one to ask), and a time limit.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vigil.errors import GitError, RepositoryError

HARDENED = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "submodule.recurse=false",
    "-c",
    "diff.ignoreSubmodules=all",
    "-c",
    "status.submoduleSummary=false",
    "-c",
    "color.ui=false",
    "-c",
    "core.quotePath=false",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
)
TIMEOUT_S = 300.0  # a git command on a local repository; past this something is stuck
FALLBACK_IDENTITY = {
    "GIT_AUTHOR_NAME": "Vigil",
    "GIT_AUTHOR_EMAIL": "vigil@localhost",
    "GIT_COMMITTER_NAME": "Vigil",
    "GIT_COMMITTER_EMAIL": "vigil@localhost",
}


@dataclass(frozen=True, slots=True)
class Checkout:
    """Where a git command runs (``path``, its working folder): a repository's own
    folder (``git_dir`` None: git finds it), or a git folder named (``git_dir``)
    with the work tree named too (``work_tree``; None: none). ``isolated``: read
    no system or user configuration (a repository Vigil made)."""

    path: Path
    git_dir: Path | None = None
    work_tree: Path | None = None
    isolated: bool = False


def _env(at: Checkout, extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(LC_ALL="C", LANG="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_ATTR_NOSYSTEM="1")
    if at.isolated:
        env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    if at.git_dir is not None:
        env["GIT_DIR"] = str(at.git_dir)
        if at.work_tree is not None:
            env["GIT_WORK_TREE"] = str(at.work_tree)
    env.update(extra or {})
    return env


def run(
    at: Checkout, *args: str, check: bool = True, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in ``at``. Raises ``GitError`` with git's own message when it
    exits non-zero (unless ``check`` is False) or takes longer than ``TIMEOUT_S``,
    and ``RepositoryError`` when the folder does not exist."""
    if not at.path.is_dir():
        raise RepositoryError(f"{at.path}: no such folder")
    argv = ["git", *HARDENED, *args]
    try:
        proc = subprocess.run(
            argv,
            cwd=at.path,
            env=_env(at, extra_env),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args[:2])} in {at.path} took longer than {TIMEOUT_S:.0f}s") from None
    except FileNotFoundError:
        raise GitError("git is not installed (not found on PATH)") from None
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args[:2])} in {at.path}: {last_words(proc)}")
    return proc


def out(at: Checkout, *args: str) -> str:
    """The stdout of ``git ARGS``, stripped; raises as ``run``."""
    return run(at, *args).stdout.strip()


def last_words(proc: subprocess.CompletedProcess[str]) -> str:
    """What git said when it failed: its last lines of stderr (else stdout)."""
    text = (proc.stderr or proc.stdout).strip()
    return " / ".join(text.splitlines()[-3:]) or f"exit {proc.returncode}"


def repository_of(folder: Path) -> tuple[Path, Path]:
    """The top folder and the git folder of the repository ``folder`` is in.
    Raises ``RepositoryError`` when it is missing, not a git repository, or bare."""
    if not folder.exists():
        raise RepositoryError(f"repository {folder} does not exist")
    if not folder.is_dir():
        raise RepositoryError(f"repository {folder} is not a folder")
    proc = run(Checkout(folder), "rev-parse", "--show-toplevel", "--git-common-dir", check=False)
    lines = proc.stdout.split("\n")
    if proc.returncode != 0 or len(lines) < 2 or not lines[0]:
        raise RepositoryError(f"{folder} is not a git repository (with a working tree)")
    top = Path(lines[0]).resolve()
    return top, (folder / lines[1]).resolve()


def commit_of(at: Checkout, ref: str) -> str | None:
    """The commit ``ref`` names; None when it names none."""
    proc = run(at, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def current_branch(at: Checkout) -> str | None:
    """The branch checked out in ``at``; None when its HEAD is detached."""
    proc = run(at, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def branch_exists(at: Checkout, name: str) -> bool:
    return commit_of(at, f"refs/heads/{name}") is not None


def checked_out_at(at: Checkout, branch: str) -> Path | None:
    """The worktree (the repository's own folder included) that has ``branch``
    checked out; None when none has."""
    listing = out(at, "worktree", "list", "--porcelain", "-z").split("\0")
    path: Path | None = None
    for line in listing:
        if line.startswith("worktree "):
            path = Path(line.removeprefix("worktree "))
        elif line == f"branch refs/heads/{branch}" and path is not None:
            return path
    return None


def dirty(at: Checkout, *, untracked: bool = True) -> bool:
    """Whether ``at`` has changes not committed (untracked files too, unless told)."""
    mode = "--untracked-files=all" if untracked else "--untracked-files=no"
    return bool(out(at, "status", "--porcelain", "--ignore-submodules=all", mode))


def has_identity(at: Checkout) -> bool:
    """Whether git has a user name and email to commit with here."""
    return all(run(at, "config", "--get", key, check=False).stdout.strip() for key in ("user.name", "user.email"))


def identity_env(at: Checkout) -> dict[str, str]:
    """What Vigil's own commits need: nothing when the repository (or the user) has
    an identity, else Vigil's."""
    return {} if has_identity(at) else dict(FALLBACK_IDENTITY)


def identity_of(at: Checkout) -> dict[str, str]:
    """The identity of the repository's user as environment variables (for a
    commit made in a repository that reads no user configuration), else Vigil's."""
    name = run(at, "config", "--get", "user.name", check=False).stdout.strip()
    email = run(at, "config", "--get", "user.email", check=False).stdout.strip()
    if not (name and email):
        return dict(FALLBACK_IDENTITY)
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def commits_between(at: Checkout, since: str, until: str) -> list[str]:
    """The commits reachable from ``until`` but not ``since``, oldest first, as
    ``abc1234 subject``."""
    text = out(at, "log", "--reverse", "--format=%h %s", f"{since}..{until}", "--")
    return text.splitlines() if text else []


def merge_base(at: Checkout, one: str, other: str) -> str | None:
    proc = run(at, "merge-base", one, other, check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def is_ancestor(at: Checkout, ancestor: str, descendant: str) -> bool:
    return run(at, "merge-base", "--is-ancestor", ancestor, descendant, check=False).returncode == 0


# A diff for a person to review: every file as text, whatever attributes say
# (``-diff`` would print "Binary files differ"), no textconv or external diff program,
# a nested repository's commit shown (in a view there is no submodule to look into).
REVIEW_DIFF = ("--text", "--no-textconv", "--no-ext-diff", "-M", "--ignore-submodules=dirty")


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file of a diff: lines added and removed (None for a binary file)."""

    path: str
    added: int | None
    removed: int | None


def numstat(at: Checkout, since: str, until: str) -> list[FileChange]:
    """The files ``since..until`` changes, in git's order (renames as the new path)."""
    raw = out(at, "diff", *REVIEW_DIFF, "--numstat", "-z", since, until, "--")
    fields = raw.split("\0")
    changes: list[FileChange] = []
    index = 0
    while index < len(fields) and fields[index]:
        added, removed, path = fields[index].split("\t", 2)
        index += 1
        if not path:  # a rename: the old and the new path follow
            path = fields[index + 1]
            index += 2
        binary = added == "-"
        changes.append(FileChange(path, None if binary else int(added), None if binary else int(removed)))
    return changes


def patch(at: Checkout, since: str, until: str, paths: Sequence[str] = ()) -> str:
    """The unified diff ``since..until`` (of ``paths`` only, when given), every
    file as text (``REVIEW_DIFF``)."""
    return run(at, "diff", *REVIEW_DIFF, since, until, "--", *paths).stdout
