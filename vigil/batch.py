"""``vigil task add --from FILE``: many tasks from JSON Lines, added in one transaction.

Each line is one JSON object with the fields of a task as ``vigil task show --json``
names them (``subject`` is required; ``description``, ``priority``, ``skills`` (a
list), ``source``, ``source_key``, ``dedup``, ``parent_id``, ``depends_on`` (a list
of ids), ``scheduled_for`` (ISO 8601 or a duration from now, as ``--at`` takes),
``max_retries``, ``model``, ``workdir``) and ``requires_approval`` (true/false).
The fields a task only gets once stored (``id``, ``status``, ``created_at`` …)
are ignored, so a task's JSON can be fed back; any other field is a mistake.

Every field is checked for its JSON type (``FIELDS``), then the line exactly as
``vigil task add`` checks its options, before anything is written. A line that is
not JSON, or not a valid task, refuses the whole batch (``BadLines``: nothing is added, every bad line is named), unless
``skip_bad``: then it is reported as refused and the others are added. Dedup keys
work as for one task, within the batch too; a flood limit refuses one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vigil.clock import SystemClock
from vigil.commands import new_task_from_options
from vigil.errors import InputError
from vigil.json_input import load_object, lone_surrogate_in
from vigil.models import MAX_ID, MAX_PRIORITY, MAX_RETRIES, MIN_PRIORITY, NewTask

if TYPE_CHECKING:
    from vigil.store.tasks import Tasks

# What a stored task's JSON has that a new task does not take (ignored on input).
STORED_ONLY = frozenset(
    {
        "id", "status", "created_at", "updated_at", "started_at", "completed_at", "attempt_count",
        "cost_usd", "api_cost_usd", "tokens_in", "tokens_out", "result_summary", "result_detail",
        "executor", "claimed_by", "lease_until", "cancel_requested", "waiting_on", "approval",
        "runs", "notes", "events",
    }
)  # fmt: skip
MAX_NAMED = 20  # bad lines named in the error


class BadLines(InputError):
    """Lines that are not JSON or not valid tasks; nothing was added."""


@dataclass(frozen=True)
class LineReport:
    """One line of the input (1-based ``line``): ``result`` created, existing or
    refused, the task's id (new or existing; None when refused or its ``ever``
    key's task is gone) and why it was refused."""

    line: int
    result: str
    task_id: int | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"line": self.line, "result": self.result, "id": self.task_id, "reason": self.reason}


def _kind(value: object) -> str:
    """The JSON name of ``value``'s type, for an error message."""
    if isinstance(value, bool):
        return "true/false"
    return {str: "text", int: "a number", float: "a number", list: "a list", dict: "an object"}.get(
        type(value), type(value).__name__
    )


def _text(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise InputError(f"{field} must be text, got {_kind(value)}")
    return value


def _integer(field: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError(f"{field} must be an integer, got {_kind(value)}")
    if not low <= value <= high:
        raise InputError(f"{field} must be an integer from {low} to {high}, got {value}")
    return value


def _ids(field: str, value: object) -> str:
    if not isinstance(value, list):
        raise InputError(f"{field} must be a list of task ids, got {_kind(value)}")
    return ",".join(str(_integer(f"each of {field}", v, 1, MAX_ID)) for v in value)


def _names(field: str, value: object) -> str:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{field} must be a list of texts, got {_kind(value)}")
    return ",".join(value)


def _flag(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{field} must be true or false, got {_kind(value)}")
    return value


def _dedup(field: str, value: object) -> str:
    if value not in ("open", "ever"):
        raise InputError(f"{field} must be 'open' or 'ever', got {value!r}")
    return str(value)


# A field of the line → the ``vigil task add`` option it stands for, and how its
# JSON value becomes that option's value (raising ``InputError`` naming the field).
FIELDS: dict[str, tuple[str, Callable[[str, object], object]]] = {
    "description": ("description", _text),
    "priority": ("priority", lambda f, v: str(_integer(f, v, MIN_PRIORITY, MAX_PRIORITY))),
    "skills": ("skills", _names),
    "source": ("source", _text),
    "source_key": ("source_key", _text),
    "dedup": ("dedup", _dedup),
    "parent_id": ("parent", lambda f, v: _integer(f, v, 1, MAX_ID)),
    "depends_on": ("depends_on", _ids),
    "scheduled_for": ("at", _text),  # ISO 8601 or a duration from now, as --at takes
    "max_retries": ("max_retries", lambda f, v: _integer(f, v, 0, MAX_RETRIES)),
    "model": ("model", _text),
    "workdir": ("workdir", _text),
    "requires_approval": ("requires_approval", _flag),
}


def _options(record: Mapping[str, Any]) -> dict[str, Any]:
    """A line's fields as ``vigil task add`` options, each checked for its type;
    raises ``InputError`` naming the field."""
    unknown = sorted(set(record) - FIELDS.keys() - STORED_ONLY - {"subject"})
    if unknown:
        raise InputError(f"unknown field {unknown[0]!r}")
    opts: dict[str, Any] = {}
    for field, (option, convert) in FIELDS.items():
        value = record.get(field)
        if value is not None:
            opts[option] = convert(field, value)
    return opts


def parse_line(text: str, now_ms: int, skills_dir: Path | None) -> NewTask:
    """One JSON line → the task it describes; raises ``InputError`` saying why not."""
    record = load_object(text)
    subject = record.get("subject")
    if not isinstance(subject, str):
        raise InputError("subject (text) is required")
    if lone_surrogate_in(record):
        raise InputError("a text holds a lone surrogate escape (such as \\ud800): not UTF-8")
    return new_task_from_options(subject, _options(record), now_ms, skills_dir)


def add_lines(
    tasks: Tasks, lines: Iterable[bytes], *, actor: str, skills_dir: Path | None, skip_bad: bool
) -> list[LineReport]:
    """Check every line, then add the good ones in one transaction. Blank lines are
    skipped. Raises ``BadLines`` (nothing added) for bad lines unless ``skip_bad``."""
    now = SystemClock().now_ms()
    good: list[tuple[int, NewTask]] = []
    bad: list[LineReport] = []
    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            bad.append(LineReport(number, "refused", reason="not UTF-8"))
            continue
        if not text.strip():
            continue
        try:
            good.append((number, parse_line(text, now, skills_dir)))
        except InputError as err:
            bad.append(LineReport(number, "refused", reason=str(err)))
    if bad and not skip_bad:
        named = "; ".join(f"line {r.line}: {r.reason}" for r in bad[:MAX_NAMED])
        more = f" (and {len(bad) - MAX_NAMED} more)" if len(bad) > MAX_NAMED else ""
        raise BadLines(f"{len(bad)} bad line(s), nothing added: {named}{more}; --skip-bad adds the others")
    results = tasks.add_each([new for _, new in good], actor=actor) if good else []
    reports = [LineReport(n, r.outcome, r.task_id, r.reason) for (n, _), r in zip(good, results, strict=True)]
    return sorted(reports + bad, key=lambda r: r.line)


def summary(reports: list[LineReport]) -> str:
    """``created 9,950, existing 49, refused 1`` and a line per refused task."""
    counts = {result: sum(r.result == result for r in reports) for result in ("created", "existing", "refused")}
    lines = [", ".join(f"{name} {n:,}" for name, n in counts.items())]
    lines += [f"line {r.line}: refused: {r.reason}" for r in reports if r.result == "refused"]
    return "\n".join(lines)
