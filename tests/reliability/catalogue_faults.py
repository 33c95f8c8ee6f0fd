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


def _over(title: str, command: tuple[str, ...], message: str) -> Case:
    return Case("CLI", title, command, 2, message)


# A person's text past its cap (vigil.caps) is refused naming the cap; before, a
# 100 MB note was stored (and held about 1 GB in the MCP server).
CAPS = [
    _over("subject past 500 characters", ("task", "add", "s" * 501), "the subject is 501 characters; at most 500"),
    _over(
        "description past 100,000 characters",
        ("task", "add", "x", "--description", "d" * 100_001),
        "the description is 100,001 characters; at most 100,000",
    ),
    _over("note past 65,536 characters", ("task", "note", "1", "n" * 65_537), "at most 65,536 are stored"),
    _over(
        "summary past 4,000 characters",
        ("task", "close", "1", "--status", "completed", "--summary", "s" * 4_001),
        "--summary is 4,001 characters; at most 4,000",
    ),
    _over("answer past 10,000 characters", ("task", "answer", "1", "a" * 10_001), "at most 10,000 are stored"),
    _bulk("subject past 500 characters", {"subject": "s" * 501}, "line 1: the subject is 501 characters; at most 500"),
]

SMALLER = [
    _over("--max-cost 1e309 (infinity)", ("task", "add", "x", "--max-cost", "1e309"), "--max-cost: expected a number"),
    _over("--max-cost nan", ("task", "add", "x", "--max-cost", "nan"), "--max-cost: expected a number of USD"),
]

CASES: list[Case] = [*BULK, *CAPS, *SMALLER]
