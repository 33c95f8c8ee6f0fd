"""Finding and creating a home: the folder with vigil.toml, the database, skills/, logs/.

Found from ``--home``, then ``VIGIL_HOME``, then the nearest ``vigil.toml`` upwards
from the current folder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from vigil.config import CONFIG_NAME
from vigil.errors import HomeError, SkillError
from vigil.models import SKILL_NAME

NEW_HOME_CONFIG = """\
# Vigil home. Every key is described in docs/configuration.md.

[dispatch]
# dry-run builds the prompt and stores it, spending nothing. Switch to "claude" or
# "codex" once the agent CLI is installed and logged in.
executor = "dry-run"
timeout = "30m"
max_retries = 3
retry_backoff = "30s"

[executors.claude]
command = ["claude"]
# model = "claude-sonnet-4-5"
# max_budget_usd = 2.0
"""

# What `vigil init` adds so that a home left running for months stays bounded in
# disk and in spend. Live keys, not comments: a person who never reads the docs
# still gets them. Homes made before keep what they have (nothing is rewritten).
SAFE_DEFAULTS = """
[retention]
# `vigil run` prunes every hour: finished tasks older than keep_finished go, with
# their runs, notes, audit trail and transcripts; audit rows of the tasks that stay
# go after keep_events. The spend of what is pruned stays in the cost archive,
# for ever (set keep_costs to bound it). Remove a key to keep that history for ever.
keep_finished = "90d"
keep_events = "30d"

[budget]
# Spend cap in USD over any rolling 24 h: past it only urgent tasks (priority 1)
# run. The alert hook ([alerts]) is told at 50%, 80% and 100% of it.
# Set it to what you mean to spend; remove daily_usd for no cap.
daily_usd = 10.0
warn_at = [0.5, 0.8, 1.0]
"""


def find_home(explicit: str | None, cwd: Path | None = None) -> Path:
    """The home to use; raises ``HomeError`` when none is given or found."""
    if explicit is not None:
        return _existing(Path(explicit), "--home")
    env = os.environ.get("VIGIL_HOME")
    if env:
        return _existing(Path(env), "VIGIL_HOME")
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / CONFIG_NAME).is_file():
            return folder
    raise HomeError(f"no {CONFIG_NAME} here or above {start}; pass --home, set VIGIL_HOME, or run 'vigil init'")


def _existing(path: Path, given_by: str) -> Path:
    path = path.expanduser().resolve()
    if not path.exists():
        raise HomeError(f"home {path} (from {given_by}) does not exist; create it with 'vigil init {path}'")
    if not path.is_dir():
        raise HomeError(f"home {path} (from {given_by}) is not a folder")
    if not (path / CONFIG_NAME).is_file():
        # Refuse rather than silently create a database in an arbitrary folder.
        raise HomeError(f"{path} (from {given_by}) is not a Vigil home: no {CONFIG_NAME}; run 'vigil init {path}'")
    return path


def init_home(path: Path, *, safe_defaults: bool = False) -> list[Path]:
    """Create a new home at ``path``; returns what was created. Never overwrites.

    ``safe_defaults`` also writes ``SAFE_DEFAULTS`` (retention on, a daily budget),
    as ``vigil init`` does; without it the home is bare, for tests and benchmarks
    that set those sections themselves."""
    path = path.expanduser().resolve()
    if (path / CONFIG_NAME).exists():
        raise HomeError(f"{path} is already a Vigil home ({CONFIG_NAME} exists)")
    created: list[Path] = []
    path.mkdir(parents=True, exist_ok=True)
    config = path / CONFIG_NAME
    config.write_text(NEW_HOME_CONFIG + (SAFE_DEFAULTS if safe_defaults else ""), encoding="utf-8")
    created.append(config)
    for name, mode in (("skills", 0o755), ("logs", 0o700), ("data", 0o700)):
        folder = path / name
        if not folder.exists():
            folder.mkdir(mode=mode)
            created.append(folder)
    return created


WORK_DIR = "work"  # the agents' scratch workspaces, one folder per task id (dispatch.workspace)


def scratch_path(home: Path, task_id: int) -> Path:
    """``work/<task id>`` in the home: the scratch workspace of a task."""
    return home / WORK_DIR / str(task_id)


def scratch_task_ids(home: Path) -> list[int]:
    """The ids of the tasks that have a scratch workspace (none without ``work/``)."""
    work = home / WORK_DIR
    if not work.is_dir():
        return []
    return sorted(int(entry.name) for entry in work.iterdir() if entry.name.isdigit() and entry.is_dir())


def remove_scratch(home: Path, task_ids: Iterable[int]) -> int:
    """Remove the scratch workspaces of ``task_ids``; returns how many went. One that
    cannot be removed is left for the next pass."""
    removed = 0
    for task_id in task_ids:
        folder = scratch_path(home, task_id)
        shutil.rmtree(folder, ignore_errors=True)
        removed += not folder.exists()
    return removed


SKILL_FILE = "SKILL.md"


def skill_names(skills_dir: Path) -> list[str]:
    """Names of the skills in ``skills_dir``: its folders with a ``SKILL.md``, sorted
    ([] when the folder does not exist)."""
    if not skills_dir.is_dir():
        return []
    return sorted(
        entry.name
        for entry in skills_dir.iterdir()
        if SKILL_NAME.fullmatch(entry.name) and (entry / SKILL_FILE).is_file()
    )


def missing_skills_problem(skills_dir: Path, names: Iterable[str]) -> str | None:
    """Why ``names`` cannot be a task's skills in this home (some do not exist), naming
    the skills that do; None when every one exists. Only existence is checked here:
    a skill file that does not parse fails its task when it runs, with the reason."""
    names = list(names)
    if not names:
        return None
    existing = skill_names(skills_dir)
    missing = [name for name in names if name not in existing]
    if not missing:
        return None
    what = ", ".join(repr(name) for name in missing)
    known = f"skills in this home: {', '.join(existing)}" if existing else f"this home has no skills ({skills_dir})"
    return f"unknown skill{'s' if len(missing) > 1 else ''} {what}; {known}"


def check_skills_exist(skills_dir: Path, names: Iterable[str]) -> None:
    """Raise ``SkillError`` (exit 2) when a skill in ``names`` does not exist."""
    problem = missing_skills_problem(skills_dir, names)
    if problem is not None:
        raise SkillError(problem)
