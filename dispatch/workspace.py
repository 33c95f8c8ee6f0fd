"""The agent's workspace: the one folder a run's agent may write.

Every run gets one, and it is never the home itself. In order: the task's own
``workdir`` (``vigil task add --workdir``; a follow-up inherits its parent's), the
first of its skills that names one, ``[dispatch] workdir``; else a **scratch**
folder of the task's own, ``work/<task id>`` in the home, made (0700) for its first
run, kept ``[dispatch] keep_workspace`` after the task ends, then removed by
retention. Retries of a task reuse its scratch folder.

The agent CLIs are started in the workspace and their sandboxes let the agent write
there and nowhere else in the home (``dispatch.executors.claude``,
``dispatch.executors.codex``). A workspace that contains the home widens that wall:
``exposure`` says so at start-up and in ``vigil doctor``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dispatch.skills import Skill
from vigil.config import Settings
from vigil.home import scratch_path
from vigil.models import Task


@dataclass(frozen=True, slots=True)
class Workspace:
    """Where one run's agent works. ``scratch``: a folder of the task's own under
    ``work/`` (made here, removed by retention); else a folder someone named."""

    path: Path
    scratch: bool


def workspace_of(task: Task, skills: Sequence[Skill], settings: Settings) -> Workspace:
    """The workspace of ``task``'s next run (relative folders are relative to the
    home, ``~`` expanded). Whether a named folder exists is checked when the agent's
    process starts."""
    chosen = task.workdir or next((s.workdir for s in skills if s.workdir), None)
    if chosen is not None:
        return Workspace((settings.home / Path(chosen).expanduser()).resolve(), scratch=False)
    if settings.dispatch.workdir is not None:
        return Workspace(settings.dispatch.workdir, scratch=False)
    return Workspace(scratch_path(settings.home, task.id), scratch=True)


def make_workspace(workspace: Workspace) -> None:
    """Create a scratch workspace (0700, its ``work/`` parent too) if it is missing;
    a named folder is left as it is. Raises ``OSError`` when it cannot be made."""
    if workspace.scratch:
        workspace.path.parent.mkdir(mode=0o700, exist_ok=True)
        workspace.path.mkdir(mode=0o700, exist_ok=True)


def contains(folder: Path, inner: Path) -> bool:
    """Whether ``inner`` is ``folder`` or lies inside it (both resolved)."""
    return inner.resolve().is_relative_to(folder.resolve())
