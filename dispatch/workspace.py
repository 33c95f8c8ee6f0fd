"""The agent's workspace: the one folder a run's agent may write.

Every run gets one, and it is never the home itself. In order: the task's own
``workdir`` (``vigil task add --workdir``; a follow-up inherits its parent's); a
**clone** of a git repository when the task names one (``--repo``), or works on
from its parent's (a follow-up), or its first skill naming a workdir or a
repository names a repository, or ``[dispatch]`` does (docs/coding.md); the first
of its skills that names a workdir; ``[dispatch] workdir``; else a **scratch**
folder of the task's own, ``work/<task id>`` in the home, made (0700) for its first
run, kept ``[dispatch] keep_workspace`` after the task ends, then removed by
retention. Retries of a task reuse its scratch folder; its clone (also at
``work/<task id>``; ``dispatch.worktree`` makes it) is made afresh for each attempt
from what the earlier ones left.

The agent CLIs are started in the workspace and their sandboxes let the agent write
there and nowhere else in the home (``dispatch.agents.claude.executor``,
``dispatch.agents.codex.executor``). A workspace that contains the home widens that wall:
``dispatch.agents.doctor`` says so at start-up and in ``vigil doctor``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dispatch.skills import Skill
from vigil.codework import CodeOptions, Worktree
from vigil.config import Settings
from vigil.home import scratch_path
from vigil.models import Task


@dataclass(frozen=True, slots=True)
class Workspace:
    """Where one run's agent works. ``scratch``: a folder of the task's own under
    ``work/`` (made here, removed by retention); ``repo``: a clone of that
    repository, on a branch from ``base`` (None: the repository's current
    branch), or from ``start_commit`` (a follow-up's parent's artifact) when the
    repository has it; else a folder someone named."""

    path: Path
    scratch: bool
    repo: Path | None = None
    base: str | None = None
    start_commit: str | None = None


def code_of(task: Task, skills: Sequence[Skill], settings: Settings, gates: CodeOptions | None = None) -> CodeOptions:
    """The code options of ``task``'s next run: each one the task's own, else its
    first skill's that says it, else ``[dispatch]``'s. ``gates``: the parent's, for
    a follow-up an agent added, which it cannot weaken (``with_gates``)."""
    code = task.code or CodeOptions()
    for skill in skills:
        code = code.over(skill.code)
    code = code.over(settings.dispatch.code)
    return code if gates is None else with_gates(code, gates)


def with_gates(code: CodeOptions, gates: CodeOptions) -> CodeOptions:
    """``code`` held to a parent's gates: the parent's repository, base and merge
    mode, its checks first (then any of the follow-up's own), review when either
    asks for it. An agent adding a follow-up cannot get past what its own task
    had to pass."""
    checks = (*(gates.checks or ()), *(c for c in code.checks or () if c not in (gates.checks or ())))
    return CodeOptions(
        repo=gates.repo or code.repo,
        base=gates.base or code.base,
        workspace=gates.workspace or code.workspace,
        checks=checks or None,
        review=bool(gates.review or code.review) if gates.review is not None or code.review is not None else None,
        merge=gates.merge or code.merge,
    )


def is_agents_followup(task: Task) -> bool:
    """Whether an agent added ``task`` (``add_followup``) as a follow-up of its parent."""
    return task.parent_id is not None and task.source == f"task:{task.parent_id}"


def workspace_of(task: Task, skills: Sequence[Skill], settings: Settings, parents: Sequence[Task] = ()) -> Workspace:
    """The workspace of ``task``'s next run (relative folders are relative to the
    home, ``~`` expanded; ``parents`` its parent chain, nearest first). Whether a
    named folder exists is checked when the agent's process starts; whether a
    repository is one, when its worktree is made."""
    home = settings.home

    def folder(name: str) -> Path:
        return (home / Path(name).expanduser()).resolve()

    def worktree(repo: str, base: str | None, start: str | None = None) -> Workspace:
        return Workspace(scratch_path(home, task.id), False, folder(repo), base, start)

    if task.worktree is not None:
        return worktree(task.worktree.repo, task.worktree.base)
    own = task.code or CodeOptions()
    if parents and parents[0].worktree is not None and is_agents_followup(task):
        # an agent's follow-up works on its parent's repository, whatever it asked
        parent = parents[0].worktree
        return worktree(parent.repo, parent.base, parent.artifact or parent.start)
    if task.workdir:
        return Workspace(folder(task.workdir), scratch=False)
    if own.repo:
        found = _parent_worktree(parents, folder(own.repo))
        start = (found.artifact or found.start) if found else None
        return worktree(own.repo, own.base or (found.base if found else None), start)
    if parents and parents[0].worktree is not None:
        parent = parents[0].worktree
        return worktree(parent.repo, own.base or parent.base, parent.artifact or parent.start)
    for skill in skills:
        if skill.workdir:
            return Workspace(folder(skill.workdir), scratch=False)
        if skill.code.repo:
            return worktree(skill.code.repo, own.base or skill.code.base or settings.dispatch.code.base)
    if settings.dispatch.code.repo:
        return worktree(settings.dispatch.code.repo, own.base or settings.dispatch.code.base)
    if settings.dispatch.workdir is not None:
        return Workspace(settings.dispatch.workdir, scratch=False)
    return Workspace(scratch_path(home, task.id), scratch=True)


def _parent_worktree(parents: Sequence[Task], repo: Path) -> Worktree | None:
    """The nearest parent's worktree of ``repo``: a follow-up branches from it."""
    for parent in parents:
        if parent.worktree is not None:
            return parent.worktree if Path(parent.worktree.repo) == repo else None
    return None


def make_workspace(workspace: Workspace) -> None:
    """Create a scratch workspace (0700, its ``work/`` parent too) if it is missing;
    a named folder is left as it is. Raises ``OSError`` when it cannot be made."""
    if workspace.scratch:
        workspace.path.parent.mkdir(mode=0o700, exist_ok=True)
        workspace.path.mkdir(mode=0o700, exist_ok=True)


def contains(folder: Path, inner: Path) -> bool:
    """Whether ``inner`` is ``folder`` or lies inside it (both resolved)."""
    return inner.resolve().is_relative_to(folder.resolve())
