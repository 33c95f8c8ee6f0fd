"""The catalogue's cases from the third fault hunt (issue 38): bulk add lines of
every wrong type, text past the documented size caps, numbers JSON cannot hold,
and a clock past what the standard library can format. Each failed before the fix
(a traceback, a batch refused naming no line, or a value silently taken).

The faults of that hunt that are not one command's input (a migrate's old file, a
notifier holding shutdown, MCP calls never answered) have tests of their own, listed
beside this table in docs/reliability.md.
"""

from __future__ import annotations

import json

from tests.reliability.catalogue import Case

BIG = 99999999999999999999  # beyond a 64-bit integer


def _bulk(title: str, record: dict[str, object] | str, message: str) -> Case:
    """A one-line bulk add refused whole, naming the line and the field."""
    text = record if isinstance(record, str) else json.dumps(record)
    return Case("CLI", f"bulk add: {title}", ("task", "add", "--from", "-"), 2, message, stdin=text + "\n")


def _bulk_skipped(title: str, record: dict[str, object] | str, message: str) -> Case:
    """The same line with ``--skip-bad``: refused alone, named on the report (exit 1:
    nothing was added)."""
    text = record if isinstance(record, str) else json.dumps(record)
    return Case(
        "CLI",
        f"bulk add --skip-bad: {title}",
        ("task", "add", "--from", "-", "--skip-bad"),
        1,
        message,
        stdin=text + "\n",
        kind="shown",
    )


BULK = [
    _bulk("nesting 100,000 deep", "[" * 100_000 + "]" * 100_000, "line 1: nested deeper than 100 levels"),
    _bulk("scheduled_for a number", {"subject": "x", "scheduled_for": 5}, "line 1: scheduled_for must be text"),
    _bulk("dedup not open or ever", {"subject": "x", "source_key": "k", "dedup": "x"}, "line 1: dedup must be 'open'"),
    _bulk("source a list", {"subject": "x", "source": ["a"]}, "line 1: source must be text, got a list"),
    _bulk("model true", {"subject": "x", "model": True}, "line 1: model must be text, got true/false"),
    _bulk_skipped("a lone surrogate", '{"subject": "x\\ud800"}', "line 1: refused: a text holds a lone surrogate"),
    _bulk_skipped("parent_id -1", {"subject": "x", "parent_id": -1}, "line 1: refused: parent_id must be an integer"),
    _bulk_skipped(
        "parent_id beyond 64 bits", {"subject": "x", "parent_id": BIG}, "line 1: refused: parent_id must be an integer"
    ),
]

CASES: list[Case] = [*BULK]
