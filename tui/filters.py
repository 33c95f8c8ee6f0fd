"""The filter bar's language: plain words plus qualifiers, turned into a store query.

``deploy status:failed,canceled source:sensor:inbox skill:web pri<3`` keeps tasks
whose subject contains "deploy" (every plain word must appear, case-insensitive for
ASCII), whose state is failed or canceled, whose source starts with
``sensor:inbox``, that list the skill ``web`` and whose priority is below 3.
Qualifiers: ``status:`` (alias ``is:``; a status, or a state of
``vigil.states`` such as ``approval``), ``source:``, ``skill:``, ``id:`` and
``pri``/``priority`` with ``:``, ``=``, ``<``, ``<=``, ``>``, ``>=``. A word with
an unknown ``name:`` prefix is plain text (a URL stays searchable).

The filter is not applied here: ``TaskFilter.query`` is what the store answers
(``Store.task_window``), over every task, not over the rows on screen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vigil.errors import InputError
from vigil.states import STATES_BY_NAME, TaskState, parse_states
from vigil.task_query import Sort, TaskQuery

_PRIORITY = re.compile(r"(?:pri|priority)(<=|>=|<|>|=|:)(.*)")


class FilterError(InputError):
    """The filter text has a qualifier with a value that cannot mean anything."""


@dataclass(frozen=True)
class TaskFilter:
    """A parsed filter; the empty filter keeps every open task."""

    text: str = ""
    words: tuple[str, ...] = ()
    states: tuple[TaskState, ...] = ()
    sources: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    ids: tuple[int, ...] = ()
    priority: tuple[str, int] | None = None

    @property
    def is_empty(self) -> bool:
        return not self.text.strip()

    def query(self, sort: Sort = Sort.QUEUE, *, descending: bool = False) -> TaskQuery:
        """What the store is asked for: this filter in this order."""
        return TaskQuery(
            states=self.states,
            words=self.words,
            ids=self.ids,
            sources=self.sources,
            skills=self.skills,
            priority=self.priority,
            sort=sort,
            descending=descending,
        )

    def with_state(self, name: str) -> TaskFilter:
        """This filter with ``status:`` replaced by the state ``name`` (or removed if
        it was the only one): what clicking a count in the header does."""
        kept = [part for part in self.text.split() if not part.lower().startswith(("status:", "is:"))]
        if tuple(s.name for s in self.states) != (name,):
            kept.append(f"status:{name}")
        return parse_filter(" ".join(kept))


def _parse_states(value: str) -> tuple[TaskState, ...]:
    try:
        return parse_states(value)
    except ValueError as err:
        raise FilterError(str(err)) from None


def parse_filter(text: str) -> TaskFilter:
    """Parse the filter bar's text; raises ``FilterError`` for a bad qualifier value."""
    words: list[str] = []
    states: dict[str, TaskState] = {}
    sources: list[str] = []
    skills: list[str] = []
    ids: list[int] = []
    priority: tuple[str, int] | None = None
    for part in text.split():
        lowered = part.lower()
        name, _, value = part.partition(":")
        if match := _PRIORITY.fullmatch(lowered):
            op, raw = match.groups()
            if not raw.isdigit():
                raise FilterError(f"{part!r}: priority must be a number, e.g. pri<3")
            priority = ("=" if op == ":" else op, int(raw))
        elif name.lower() in ("status", "is") and value:
            states.update((s.name, s) for s in _parse_states(value.lower()))
        elif name.lower() == "source" and value:
            sources.append(value)
        elif name.lower() == "skill" and value:
            skills.extend(filter(None, value.split(",")))
        elif name.lower() == "id" and value:
            try:
                ids.extend(int(v.lstrip("#")) for v in value.split(",") if v)
            except ValueError:
                raise FilterError(f"{part!r}: id must be a task number, e.g. id:412") from None
        else:
            words.append(part.lower())
    return TaskFilter(
        text=text.strip(),
        words=tuple(words),
        states=tuple(s for s in STATES_BY_NAME.values() if s.name in states),
        sources=tuple(sources),
        skills=tuple(skills),
        ids=tuple(dict.fromkeys(ids)),
        priority=priority,
    )
