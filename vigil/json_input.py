"""JSON from outside Vigil (a bulk-add file, the agent's tool calls), read without
trusting its shape: the parser's recursion is bounded before it starts, and a lone
surrogate escape (``"\\ud800"``, valid JSON but no text any file, database or
terminal can take) is found before anything tries to store it."""

from __future__ import annotations

import json
from typing import Any

from vigil.errors import InputError

MAX_NESTING = 100  # brackets deep: a task needs two; past this the parser would only recurse


def nesting(text: str) -> int:
    """How deep the brackets of ``text`` go (those inside strings counted too: an
    over-estimate, enough to refuse a text before the parser recurses into it)."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return 0  # cannot be deeper: the common case costs two counts
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def load_object(text: str) -> dict[str, Any]:
    """The JSON object ``text`` holds; raises ``InputError`` saying why there is none
    (not JSON, not an object, nested deeper than ``MAX_NESTING``)."""
    if nesting(text) > MAX_NESTING:
        raise InputError(f"nested deeper than {MAX_NESTING} levels")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"not JSON: {err}") from None
    except RecursionError:  # deeper than the interpreter allows, whatever the count above said
        raise InputError("nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError("not a JSON object")
    return data


def lone_surrogate_in(value: object) -> bool:
    """Whether any text in ``value`` (a decoded JSON value) holds a lone surrogate."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, list):
        return any(lone_surrogate_in(item) for item in value)
    if isinstance(value, dict):
        return any(lone_surrogate_in(k) or lone_surrogate_in(v) for k, v in value.items())
    return False
