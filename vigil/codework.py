"""The values of code work: a task that works on a git repository (docs/coding.md).

A task, its skills or ``[dispatch]`` may name the repository its agent works on
(``repo``), the branch it starts from and is merged into (``base``; the
repository's current branch when unset), the kind of workspace (``workspace``:
``worktree``, the default and only kind with a repository: a clone of the task's
own, whatever the name says), the commands that must
pass before the task is done (``checks``), whether a person reviews the result
(``review``) and how an approved branch is merged (``merge``). ``CodeOptions`` is
what one of those sources says, None where it says nothing: the task's own win,
then its first skill that says it, then ``[dispatch]``.

``Worktree`` is what Vigil made for a task (recorded on the task), ``RunChanges``
what one run changed on its branch and ``CheckResult`` how one check ended
(recorded on the run). The parsers here turn what a person wrote (TOML, a skill's
YAML, ``vigil task add``) into these values; they raise ``InputError`` with what
was expected, and the caller says where.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from vigil.durations import parse_duration_ms
from vigil.errors import InputError

WORKSPACE_KINDS = ("worktree",)
PULL_REQUEST = "pull_request"  # push the branch and open a pull request on GitHub (vigil.pull_requests)
MERGE_MODES = ("ff", "merge", "squash", "branch", PULL_REQUEST)
DEFAULT_MERGE = "branch"  # an approval leaves the branch for a person (a pull request) unless told
OUTPUT_TAIL_CHARS = 4000  # of a check's output, kept on the run


@dataclass(frozen=True, slots=True)
class Check:
    """A command that must pass (exit 0) in the workspace: an argv, never a shell
    string. ``timeout_ms`` None: the task's timeout."""

    argv: tuple[str, ...]
    timeout_ms: int | None = None

    @property
    def label(self) -> str:
        """The command as a person would type it (``pytest -q``)."""
        return shlex.join(self.argv)

    def to_json(self) -> dict[str, Any]:
        return {"command": list(self.argv), "timeout_ms": self.timeout_ms}


@dataclass(frozen=True, slots=True)
class CodeOptions:
    """What one source (a task, a skill, ``[dispatch]``) says about code work; None
    where it says nothing. ``repo`` is as written (relative to the home, ``~``
    expanded, when resolved)."""

    repo: str | None = None
    base: str | None = None
    workspace: str | None = None
    checks: tuple[Check, ...] | None = None
    review: bool | None = None
    merge: str | None = None

    def over(self, other: CodeOptions) -> CodeOptions:
        """These options, with ``other``'s where these say nothing."""
        return replace(self, **{f.name: getattr(other, f.name) for f in fields(self) if getattr(self, f.name) is None})

    @property
    def empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))

    def to_json(self) -> str | None:
        """As stored on the task (``tasks.code``); None when it says nothing."""
        if self.empty:
            return None
        value: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.checks is not None:
            value["checks"] = [check.to_json() for check in self.checks]
        return json.dumps({k: v for k, v in value.items() if v is not None})

    @classmethod
    def from_json(cls, text: str | None) -> CodeOptions | None:
        if text is None:
            return None
        value = json.loads(text)
        checks = value.get("checks")
        return cls(
            repo=value.get("repo"),
            base=value.get("base"),
            workspace=value.get("workspace"),
            checks=None if checks is None else tuple(Check(tuple(c["command"]), c.get("timeout_ms")) for c in checks),
            review=value.get("review"),
            merge=value.get("merge"),
        )


@dataclass(frozen=True, slots=True)
class Worktree:
    """The repository work Vigil set up for a task, recorded on the task.

    ``repo`` is the operator's repository's top folder and ``git_dir`` its git
    folder; ``path`` is the task's clone (``work/<task id>`` in the home, made
    afresh for each attempt: ``vigil.clones``), where the agent works on
    ``branch``. The task started at commit ``start`` of ``base`` (a branch name).
    ``artifact`` is the task's result as Vigil took it out of the clone after its
    last attempt, kept on ``ref`` (``refs/vigil/tasks/<task id>``) in the operator's
    repository; None until an attempt left one. ``merging`` is an approval under way
    (``<mode> <base's commit before> <base's commit after>``): set before the base is
    moved, so that an approval cut short is finished by the next. After an
    approval, ``merge`` is the mode used and ``merged`` the commit the base then
    pointed to (the artifact for ``branch``), ``merged_from`` the commit the diff
    was taken from."""

    repo: str
    git_dir: str
    path: str
    branch: str
    base: str
    start: str
    ref: str | None = None
    artifact: str | None = None
    merge: str | None = None
    merged: str | None = None
    merged_from: str | None = None
    merging: str | None = None

    def to_json(self) -> str:
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_json(cls, text: str | None) -> Worktree | None:
        if text is None:
            return None
        value = json.loads(text)
        return cls(**{f.name: value.get(f.name) for f in fields(cls)})


@dataclass(frozen=True, slots=True)
class CheckResult:
    """How one check ended. ``exit_code`` None: it did not end by itself (timed
    out) or could not start (``output`` says why). ``output`` is the tail of its
    stdout and stderr together."""

    argv: tuple[str, ...]
    exit_code: int | None
    output: str
    timed_out: bool = False

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def label(self) -> str:
        return shlex.join(self.argv)

    def how(self) -> str:
        """``exit 1``, ``timed out``, ``could not start``, ``passed``."""
        if self.passed:
            return "passed"
        if self.timed_out:
            return "timed out"
        return "could not start" if self.exit_code is None else f"exit {self.exit_code}"


@dataclass(frozen=True, slots=True)
class RunChanges:
    """What one run left on its task's branch. ``commits`` are the commits it
    added, oldest first (``abc1234 subject``); ``files``, ``insertions`` and
    ``deletions`` are the branch's diff stat against its base at the end of the
    run; ``dirty``: the agent left changes uncommitted, which Vigil then committed
    (the last of ``commits``)."""

    branch: str
    head: str
    commits: tuple[str, ...]
    files: int
    insertions: int
    deletions: int
    dirty: bool

    def stat(self) -> str:
        """``3 files, +10 -2``."""
        return f"{self.files} file{'' if self.files == 1 else 's'}, +{self.insertions} -{self.deletions}"


def checks_to_text(checks: Sequence[CheckResult]) -> str | None:
    """``runs.checks`` as stored: a JSON array, None when no check ran."""
    if not checks:
        return None
    return json.dumps(
        [
            {"command": list(c.argv), "exit_code": c.exit_code, "output": c.output, "timed_out": c.timed_out}
            for c in checks
        ]
    )


def checks_from_text(text: str | None) -> tuple[CheckResult, ...]:
    if text is None:
        return ()
    rows = json.loads(text)
    return tuple(CheckResult(tuple(c["command"]), c["exit_code"], c["output"], bool(c.get("timed_out"))) for c in rows)


def changes_to_text(changes: RunChanges | None) -> str | None:
    """``runs.changes`` as stored; None when the run had no worktree."""
    if changes is None:
        return None
    return json.dumps({f.name: getattr(changes, f.name) for f in fields(changes)})


def changes_from_text(text: str | None) -> RunChanges | None:
    if text is None:
        return None
    value = json.loads(text)
    return RunChanges(**{**value, "commits": tuple(value["commits"])})


# --- what people write ------------------------------------------------------------------


def parse_check(value: object) -> Check:
    """One check: an argv list (``["pytest", "-q"]``) or a table with ``command``
    (that list) and an optional ``timeout`` (``"5m"``)."""
    timeout_ms = None
    if isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in ("command", "timeout"))
        if unknown:
            raise InputError(f"unknown key {unknown[0]!r} in a check (a check has command and timeout)")
        timeout = value.get("timeout")
        if timeout is not None:
            if not isinstance(timeout, str):
                raise InputError(f"a check's timeout is a duration such as 5m, not {timeout!r}")
            timeout_ms = parse_duration_ms(timeout)
            if timeout_ms <= 0:
                raise InputError("a check's timeout must be longer than zero")
        value = value.get("command")
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise InputError(f"a check is a list of strings (an argv, not a shell string), got {value!r}")
    return Check(tuple(value), timeout_ms)


def parse_checks(value: object) -> tuple[Check, ...]:
    """A list of checks (each as ``parse_check`` reads it)."""
    if not isinstance(value, list):
        raise InputError(f'expected a list of checks, e.g. [["pytest", "-q"]], got {value!r}')
    return tuple(parse_check(item) for item in value)


def parse_command_line(text: str) -> Check:
    """A check given on the command line (``--check "pytest -q"``): split as a shell
    would split words, but never run by one."""
    try:
        argv = shlex.split(text)
    except ValueError as err:
        raise InputError(f"--check {text!r}: {err}") from None
    if not argv:
        raise InputError("--check must not be empty")
    return Check(tuple(argv))


def options_from(table: Mapping[str, Any]) -> CodeOptions:
    """The code options among ``table``'s keys (a skill's front matter, a part of
    ``[dispatch]``); raises ``InputError`` naming the key that is wrong."""

    def text(key: str) -> str | None:
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InputError(f"{key}: expected a non-empty string, got {value!r}")
        return value.strip() if isinstance(value, str) else None

    def choice(key: str, choices: tuple[str, ...]) -> str | None:
        value = text(key)
        if value is not None and value not in choices:
            raise InputError(f"{key}: expected one of {', '.join(repr(c) for c in choices)}, got {value!r}")
        return value

    review = table.get("review")
    if review is not None and not isinstance(review, bool):
        raise InputError(f"review: expected true or false, got {review!r}")
    checks = None
    if table.get("checks") is not None:
        try:
            checks = parse_checks(table["checks"])
        except InputError as err:
            raise InputError(f"checks: {err}") from None
    base = text("base")
    if base is not None and (base.startswith("-") or any(c.isspace() for c in base)):
        raise InputError(f"base: expected a branch name, got {base!r}")
    return CodeOptions(
        repo=text("repo"),
        base=base,
        workspace=choice("workspace", WORKSPACE_KINDS),
        checks=checks,
        review=review,
        merge=choice("merge", MERGE_MODES),
    )


CODE_KEYS = ("repo", "base", "workspace", "checks", "review", "merge")
