"""How long the texts Vigil stores may be, in characters, in one place.

A person's text past its cap is refused with the cap named (``refuse_over``): they
can shorten it. What the agent sends is cut with a marker instead (``cut``): its
run goes on, and what was dropped is said. docs/reliability.md lists the caps.
"""

from __future__ import annotations

from vigil.errors import InputError

SUBJECT_CHARS = 500  # one line in every list
DESCRIPTION_CHARS = 100_000  # the inbox sensor's 64 KiB and its note fit
NOTE_CHARS = 65_536
SUMMARY_CHARS = 4_000  # what the task ended with: a line or a short paragraph
ANSWER_CHARS = 10_000  # a person's answer, and the agent's question


def refuse_over(text: str, cap: int, what: str) -> str:
    """``text`` unchanged; raises ``InputError`` naming ``cap`` when it is longer."""
    if len(text) > cap:
        raise InputError(f"{what} is {len(text):,} characters; at most {cap:,} are stored")
    return text


def cut(text: str, cap: int) -> str:
    """``text``, or when longer than ``cap`` its start with a marker saying how much
    was cut: ``cap`` characters in all."""
    if len(text) <= cap:
        return text
    marker = f" … [cut by Vigil: {len(text) - cap:,} more characters]"
    # the marker's count is of what the cut drops beyond the cap; the start kept is
    # shorter by the marker's own length, so the whole is exactly the cap
    return text[: cap - len(marker)] + marker
