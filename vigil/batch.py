"""``vigil task add --from FILE``: many tasks from JSON Lines, added in one transaction.

Each line is one JSON object with the fields of a task as ``vigil task show --json``
names them (``subject`` is required; ``description``, ``priority``, ``skills`` (a
list), ``source``, ``source_key``, ``dedup``, ``parent_id``, ``depends_on`` (a list
of ids), ``scheduled_for`` (ISO 8601 or a duration from now, as ``--at`` takes),
``max_retries``, ``model``, ``workdir``) and ``requires_approval`` (true/false).
The fields a task only gets once stored (``id``, ``status``, ``created_at`` …)
are ignored, so a task's JSON can be fed back; any other field is a mistake.

Every line is checked exactly as ``vigil task add`` checks its options before
anything is written. A line that is not JSON, or not a valid task, refuses the
whole batch (``BadLines``: nothing is added, every bad line is named), unless
``skip_bad``: then it is reported as refused and the others are added. Dedup keys
work as for one task, within the batch too; a flood limit refuses one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vigil.clock import SystemClock
from vigil.commands import new_task_from_options
from vigil.errors import InputError
from vigil.models import NewTask

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
# A field of the line → the ``vigil task add`` option it stands for.
OPTIONS = {
    "description": "description",
    "priority": "priority",
    "skills": "skills",
    "source": "source",
    "source_key": "source_key",
    "dedup": "dedup",
    "parent_id": "parent",
    "depends_on": "depends_on",
    "scheduled_for": "at",
    "max_retries": "max_retries",
    "model": "model",
    "workdir": "workdir",
    "requires_approval": "requires_approval",
}
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


def _options(record: Mapping[str, Any]) -> dict[str, Any]:
    """A line's fields as ``vigil task add`` options; raises ``InputError``."""
    unknown = sorted(set(record) - OPTIONS.keys() - STORED_ONLY - {"subject"})
    if unknown:
        raise InputError(f"unknown field {unknown[0]!r}")
    opts: dict[str, Any] = {}
    for field, option in OPTIONS.items():
        value = record.get(field)
        if value is None:
            continue
        if field in ("skills", "depends_on"):
            if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
                raise InputError(f"{field} must be a list")
            value = ",".join(str(v) for v in value)
        elif field == "requires_approval" and not isinstance(value, bool):
            raise InputError("requires_approval must be true or false")
        elif field in ("parent_id", "max_retries") and (not isinstance(value, int) or isinstance(value, bool)):
            raise InputError(f"{field} must be an integer")
        elif field == "max_retries" and value < 0:
            raise InputError("max_retries must be 0 or more")
        opts[option] = str(value) if field == "priority" else value
    return opts


def parse_line(text: str, now_ms: int, skills_dir: Path | None) -> NewTask:
    """One JSON line → the task it describes; raises ``InputError`` saying why not."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"not JSON: {err}") from None
    if not isinstance(record, dict):
        raise InputError("not a JSON object")
    subject = record.get("subject")
    if not isinstance(subject, str):
        raise InputError("subject (text) is required")
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
