"""Turning an agent's final answer into ``result_summary`` and ``result_detail``.

The summary is a one-line head for lists and notifications; the detail is the
answer, capped so that one run cannot bloat the database. The transcript on disk
always keeps the whole answer.
"""

from __future__ import annotations

SUMMARY_MAX_CHARS = 200
DETAIL_MAX_CHARS = 64 * 1024


def summary_of(answer: str, max_chars: int = SUMMARY_MAX_CHARS) -> str:
    """The answer's start with whitespace collapsed, at most ``max_chars`` characters
    (an ellipsis marks a cut)."""
    # only the head matters; collapsing a 10 MB answer would be wasted work
    flat = " ".join(answer[: max_chars * 8].split())
    if len(flat) <= max_chars:
        return flat
    return flat[: max_chars - 1].rstrip() + "…"


def detail_of(answer: str, max_chars: int = DETAIL_MAX_CHARS) -> str:
    """The answer, cut to ``max_chars`` characters plus a marker saying how much was
    left out and where the rest is."""
    if len(answer) <= max_chars:
        return answer
    left_out = len(answer) - max_chars
    return answer[:max_chars] + f"\n\n[… {left_out} more characters cut; the full answer is in the run's transcript]"


def error_line(stderr: str) -> str:
    """The line of a CLI's stderr that says what went wrong: the last one that is
    not a warning (a CLI's own error comes last; a harmless warning, e.g. Codex's
    about PATH aliases, may come first), else the last line; '' when empty."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    errors = [line for line in lines if not line.upper().startswith(("WARNING", "WARN "))]
    return summary_of((errors or lines or [""])[-1], 500)
