"""Text from outside made safe to show on a terminal, without changing what is stored.

Subjects, descriptions, summaries, notes, sensor errors and agent output reach the
operator's terminal through ``vigil task list/show``, ``vigil events``, ``vigil
status``, the log and the TUI. Written raw, a control sequence in them is obeyed by
the terminal: ``ESC ] 52`` writes the clipboard, ``ESC ] 0`` the window title, SGR
hides or recolours text, ``\\r`` and the bidirectional overrides make a line read
differently from what it holds. ``printable`` shows each such character as an escape
(``\\x1b``, ``\\r``, ``\\u202e``) instead: every C0 control but the newline and the
tab, DEL, every C1 control, and the bidirectional controls (``BIDI_CONTROLS``).
What JSON leaves raw (DEL, C1, bidirectional) is written ``\\uXXXX``, so the same
function serves JSON output: the escape is JSON's own, the value unchanged.

The store keeps the text verbatim; only what is shown changes. That includes its
length: ``capped`` cuts a 100,000-character subject for a status line, the task
screen or a console log record, with a marker saying how much was left out
(printed whole it floods a terminal for minutes and hides every field after it);
``--json`` gives the text whole.
"""

from __future__ import annotations

import dataclasses
import re
from enum import Enum
from typing import TypeVar, cast

T = TypeVar("T")

# LRM, RLM, ALM, the embeddings and overrides (LRE … RLO), the isolates (LRI … PDI),
# and the line and paragraph separators, which some terminals and editors break on.
BIDI_CONTROLS = "\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}]")
_UNSAFE_IN_LINE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{BIDI_CONTROLS}]")
_NAMED = {"\r": "\\r", "\n": "\\n", "\x1b": "\\x1b"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x20 else f"\\u{code:04x}"


def printable(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` with every control and bidirectional character written as an escape.
    ``keep_newlines`` False escapes newlines too (one log line stays one line)."""
    pattern = _UNSAFE if keep_newlines else _UNSAFE_IN_LINE
    return pattern.sub(_escape, text) if pattern.search(text) else text


SUBJECT_SHOWN_CHARS = 500  # a subject in status lines, `task show`, the task screen
TEXT_SHOWN_CHARS = 4_000  # a description, question, note or result shown as text
LOG_LINE_SHOWN_CHARS = 2_000  # one console log record


def capped(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit``
    followed by ``… [N more characters]``."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters]"


def printable_values(value: T) -> T:
    """A copy of ``value`` (frozen dataclasses, tuples, lists and dicts of them, as
    far down as they go) with ``printable`` applied to every string in it: for a
    screen that draws fields of domain values (the TUI). Parts without such a
    character are returned as they are; enum members are left alone."""
    return cast(T, _shown(value))


def _shown(value: object) -> object:
    if isinstance(value, str):
        return value if isinstance(value, Enum) else printable(value)
    if type(value) in (tuple, list):
        assert isinstance(value, tuple | list)
        items = [_shown(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items)
    if isinstance(value, dict):
        return {key: _shown(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if f.init:
                old = getattr(value, f.name)
                new = _shown(old)
                if new is not old:
                    changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value
