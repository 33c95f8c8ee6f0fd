"""Skills: ``skills/<name>/SKILL.md``, markdown instructions with YAML front matter.

A task lists skills by name; the prompt includes each skill's body, and a skill may
choose how its tasks run::

    ---
    name: disk-check                # optional; must equal the folder name
    description: Checks free disk space and reports it.
    executor: command               # optional: claude, codex, command or dry-run
    model: claude-sonnet-4-5        # optional: overrides [executors.*] model
    timeout: 2m                     # optional: overrides [dispatch] timeout
    command: ["python3", "./check.py"]   # argv for the command executor
    requires_approval: false        # optional: a person approves each task first
    workdir: ~/src/project          # optional: where the agent works (relative: to the home)
    max_cost_usd: 2.0               # optional: the most a task's runs may spend together
    fallback: false                 # optional: never run on [dispatch] fallback's executors
    repo: ~/src/project             # optional: a git repository, worked on in a worktree
    base: main                      # optional: the branch to start from and merge into
    checks:                         # optional: commands that must pass before done
      - ["pytest", "-q"]
      - {command: ["ruff", "check", "."], timeout: 2m}
    review: true                    # optional: a person reviews the result
    merge: squash                   # optional: ff, merge, squash or branch (on approval)
    resume_after_failure: false     # optional: overrides [executors.*] resume_after_failure
    ---
    The instructions, in markdown.

A skill name is ``[a-z0-9][a-z0-9_-]*`` (so it can never be a path). In
``command``, an argument that starts with ``./`` names a file in the skill's folder
and is made absolute; the command is always an argv list, never a shell string.
A ``command`` without ``executor`` means ``executor: command``. The code keys
(``repo`` … ``merge``) are described in docs/coding.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vigil.codework import CODE_KEYS, CodeOptions, options_from
from vigil.config import EXECUTORS
from vigil.durations import parse_duration_ms
from vigil.errors import InputError, SkillError
from vigil.models import model_name_problem, skill_name_problem

SKILL_FILE = "SKILL.md"
KNOWN_KEYS = frozenset(
    {
        "name",
        "description",
        "executor",
        "model",
        "timeout",
        "command",
        "requires_approval",
        "workdir",
        "max_cost_usd",
        "fallback",
        *CODE_KEYS,
        "resume_after_failure",
    }
)


@dataclass(frozen=True)
class Skill:
    """A loaded skill. ``executor``/``model``/``timeout_ms`` None mean "as configured";
    ``command`` is None unless the skill runs a program."""

    name: str
    description: str
    body: str  # the markdown after the front matter
    folder: Path
    executor: str | None = None
    model: str | None = None
    timeout_ms: int | None = None
    command: tuple[str, ...] | None = None
    requires_approval: bool = False
    workdir: str | None = None  # as written; relative to the home
    max_cost_usd: float | None = None  # the most its tasks' runs may spend together (USD); None: no limit
    fallback: bool = True  # False: its tasks never run on [dispatch] fallback's executors
    code: CodeOptions = field(default_factory=CodeOptions)  # repo (as written), base, checks, review, merge
    resume_after_failure: bool | None = None  # None: as the executor's settings say


def check_name(name: str) -> str:
    """Return ``name`` if it is a valid skill name; raise ``SkillError`` otherwise."""
    problem = skill_name_problem(name)
    if problem is not None:
        raise SkillError(problem)
    return name


def _split_front_matter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{path}: must start with YAML front matter between '---' lines")
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            head = "".join(lines[1:index])
            body = "".join(lines[index + 1 :])
            break
    else:
        raise SkillError(f"{path}: the front matter has no closing '---' line")
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError as err:
        problem = str(err).splitlines()[0] if str(err) else "unreadable"
        raise SkillError(f"{path}: front matter is not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise SkillError(f"{path}: front matter must be a mapping of keys to values")
    return data, body.strip("\n")


def _opt_str(data: dict[str, Any], key: str, path: Path) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SkillError(f"{path}: {key}: expected a non-empty string, got {value!r}")
    return value.strip()


def _command(data: dict[str, Any], folder: Path, path: Path) -> tuple[str, ...] | None:
    value = data.get("command")
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise SkillError(f"{path}: command: expected a non-empty list of strings (an argv, not a shell string)")
    local = [arg for arg in value if arg.startswith("./")]
    if any(".." in Path(arg).parts for arg in local):
        raise SkillError(f"{path}: command: a './' path must stay inside the skill's folder")
    return tuple(str(folder / arg[2:]) if arg.startswith("./") else arg for arg in value)


def _timeout_ms(data: dict[str, Any], path: Path) -> int | None:
    value = data.get("timeout")
    if value is None:
        return None
    try:
        if not isinstance(value, str):
            raise InputError(str(value))
        timeout_ms = parse_duration_ms(value)
    except InputError:
        raise SkillError(f"{path}: timeout: expected a duration such as 90s, 5m, 2h, got {value!r}") from None
    if timeout_ms <= 0:
        raise SkillError(f"{path}: timeout: must be longer than zero")
    return timeout_ms


def load_skill(skills_dir: Path, name: str) -> Skill:
    """Read ``skills_dir/<name>/SKILL.md``. Raises ``SkillError`` for an invalid name,
    an unknown skill, or a SKILL.md whose front matter is missing or wrong."""
    check_name(name)
    folder = skills_dir / name
    path = folder / SKILL_FILE
    try:
        # utf-8-sig: editors on some systems add a byte-order mark
        return _parse_skill(path, path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise SkillError(f"unknown skill {name!r}: no {SKILL_FILE} in {folder}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SkillError(f"{path}: cannot read: {err}") from None


def _parse_skill(path: Path, text: str) -> Skill:
    """The skill in ``text``, read from ``path`` (``<skills>/<name>/SKILL.md``)."""
    folder = path.parent
    name = folder.name
    data, body = _split_front_matter(text, path)
    unknown = sorted(str(key) for key in data if key not in KNOWN_KEYS)
    if unknown:
        raise SkillError(f"{path}: unknown front matter key {unknown[0]!r}")
    declared = _opt_str(data, "name", path)
    if declared is not None and declared != name:
        raise SkillError(f"{path}: name {declared!r} does not match the folder name {name!r}")
    description = _opt_str(data, "description", path)
    if description is None:
        raise SkillError(f"{path}: description: required")
    command = _command(data, folder, path)
    executor = _opt_str(data, "executor", path) or ("command" if command else None)
    if executor is not None and executor not in EXECUTORS:
        raise SkillError(f"{path}: executor: expected one of {', '.join(EXECUTORS)}, got {executor!r}")
    if executor == "command" and command is None:
        raise SkillError(f"{path}: executor is 'command' but no command is given")
    approval = data.get("requires_approval", False)
    if not isinstance(approval, bool):
        raise SkillError(f"{path}: requires_approval: expected true or false, got {approval!r}")
    resume = data.get("resume_after_failure")
    if resume is not None and not isinstance(resume, bool):
        raise SkillError(f"{path}: resume_after_failure: expected true or false, got {resume!r}")
    model = _opt_str(data, "model", path)
    if model is not None and (problem := model_name_problem(model)) is not None:
        raise SkillError(f"{path}: model: {problem}")
    fallback = data.get("fallback", True)
    if not isinstance(fallback, bool):
        raise SkillError(f"{path}: fallback: expected true or false, got {fallback!r}")
    max_cost = data.get("max_cost_usd")
    if max_cost is not None and (isinstance(max_cost, bool) or not isinstance(max_cost, int | float) or max_cost < 0):
        raise SkillError(f"{path}: max_cost_usd: expected a number of USD, 0 or more, got {max_cost!r}")
    try:
        code = options_from({key: data.get(key) for key in CODE_KEYS})
    except InputError as err:
        raise SkillError(f"{path}: {err}") from None
    return Skill(
        name=name,
        description=description,
        body=body,
        folder=folder,
        executor=executor,
        model=model,
        timeout_ms=_timeout_ms(data, path),
        command=command,
        requires_approval=approval,
        workdir=_opt_str(data, "workdir", path),
        max_cost_usd=None if max_cost is None else float(max_cost),
        fallback=fallback,
        code=code,
        resume_after_failure=resume,
    )


def load_skills(skills_dir: Path, names: Iterable[str]) -> list[Skill]:
    """Load each named skill, in order, once each. Raises ``SkillError`` for the
    first one that cannot be used."""
    seen: set[str] = set()
    skills = []
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        skills.append(load_skill(skills_dir, name))
    return skills
