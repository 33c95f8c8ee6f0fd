"""The filter bar's language: plain words plus qualifiers.

``deploy status:failed,canceled source:sensor:inbox skill:web pri<3`` keeps tasks
whose subject contains "deploy" (every plain word must appear, case-insensitive),
whose status is failed or canceled, whose source starts with ``sensor:inbox``, that
list the skill ``web`` and whose priority is below 3. Qualifiers: ``status:``
(alias ``is:``), ``source:``, ``skill:``, ``id:`` and ``pri``/``priority`` with
``:``, ``=``, ``<``, ``<=``, ``>``, ``>=``. A word with an unknown ``name:`` prefix
is plain text (a URL stays searchable).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from vigil.errors import InputError
from vigil.models import FINISHED_STATUSES, Task, TaskStatus

_PRIORITY = re.compile(r"(?:pri|priority)(<=|>=|<|>|=|:)(.*)")
_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "=": operator.eq,
    ":": operator.eq,
}


class FilterError(InputError):
    """The filter text has a qualifier with a value that cannot mean anything."""


@dataclass(frozen=True)
class TaskFilter:
    """A parsed filter; the empty filter keeps every task."""

    text: str = ""
    words: tuple[str, ...] = ()
    statuses: frozenset[TaskStatus] = frozenset()
    sources: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    ids: frozenset[int] = frozenset()
    priority: tuple[str, int] | None = None

    @property
    def is_empty(self) -> bool:
        return not self.text.strip()

    @property
    def wants_finished(self) -> bool:
        """True when the statuses asked for can only come from history."""
        return bool(self.statuses & FINISHED_STATUSES)

    def matches(self, task: Task) -> bool:
        subject = task.subject.casefold()
        if any(word not in subject for word in self.words):
            return False
        if self.statuses and task.status not in self.statuses:
            return False
        if self.sources and not any(task.source.startswith(s) for s in self.sources):
            return False
        if self.skills and not set(self.skills) <= set(task.skills):
            return False
        if self.ids and task.id not in self.ids:
            return False
        if self.priority is not None:
            op, value = self.priority
            return _COMPARE[op](task.priority, value)
        return True

    def with_status(self, status: TaskStatus) -> TaskFilter:
        """This filter with ``status:`` replaced by ``status`` (or removed if it was
        the only one): what clicking a status count does."""
        kept = [part for part in self.text.split() if not part.startswith(("status:", "is:"))]
        if self.statuses != {status}:
            kept.append(f"status:{status}")
        return parse_filter(" ".join(kept))


def _parse_statuses(value: str) -> frozenset[TaskStatus]:
    result = set()
    for name in filter(None, value.split(",")):
        try:
            result.add(TaskStatus(name))
        except ValueError:
            names = ", ".join(s.value for s in TaskStatus)
            raise FilterError(f"unknown status {name!r} (expected {names})") from None
    return frozenset(result)


def parse_filter(text: str) -> TaskFilter:
    """Parse the filter bar's text; raises ``FilterError`` for a bad qualifier value."""
    words: list[str] = []
    statuses: set[TaskStatus] = set()
    sources: list[str] = []
    skills: list[str] = []
    ids: set[int] = set()
    priority: tuple[str, int] | None = None
    for part in text.split():
        lowered = part.lower()
        name, _, value = part.partition(":")
        if match := _PRIORITY.fullmatch(lowered):
            op, raw = match.groups()
            if not raw.isdigit():
                raise FilterError(f"{part!r}: priority must be a number, e.g. pri<3")
            priority = (op, int(raw))
        elif name.lower() in ("status", "is") and value:
            statuses |= _parse_statuses(value.lower())
        elif name.lower() == "source" and value:
            sources.append(value)
        elif name.lower() == "skill" and value:
            skills.extend(filter(None, value.split(",")))
        elif name.lower() == "id" and value:
            try:
                ids |= {int(v.lstrip("#")) for v in value.split(",") if v}
            except ValueError:
                raise FilterError(f"{part!r}: id must be a task number, e.g. id:412") from None
        else:
            words.append(part.casefold())
    return TaskFilter(
        text=text.strip(),
        words=tuple(words),
        statuses=frozenset(statuses),
        sources=tuple(sources),
        skills=tuple(skills),
        ids=frozenset(ids),
        priority=priority,
    )
