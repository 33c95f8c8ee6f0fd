"""Typed reading of a sensor entry's own keys, for built-in option parsers.

Every method raises ``ValueError("<key>: expected …")``; the config loader prefixes
the entry (``vigil.toml: [[sensors]] #2 (name 'inbox'): …``). ``done()`` rejects keys
nobody read, so a typo in an option fails at start-up instead of being ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vigil.durations import parse_duration_ms
from vigil.errors import InputError

_MISSING = object()


class OptionReader:
    def __init__(self, raw: Mapping[str, Any], home: Path) -> None:
        self._raw = raw
        self._home = home
        self._seen: set[str] = set()

    def _get(self, key: str, required: bool) -> Any:
        self._seen.add(key)
        value = self._raw.get(key, _MISSING)
        if value is _MISSING and required:
            raise ValueError(f"missing option {key!r}")
        return None if value is _MISSING else value

    def str_(self, key: str, default: str | None = None) -> str:
        value = self._get(key, default is None)
        if value is None:
            assert default is not None
            return default
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{key}: expected a non-empty string, got {value!r}")
        return value

    def path(self, key: str, default: str | None = None) -> Path:
        """A path; relative ones are relative to the home."""
        return (self._home / self.str_(key, default)).resolve()

    def int_(self, key: str, default: int, minimum: int = 0) -> int:
        value = self._get(key, False)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{key}: expected an integer ≥ {minimum}, got {value!r}")
        return value

    def bool_(self, key: str, default: bool) -> bool:
        value = self._get(key, False)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ValueError(f"{key}: expected true or false, got {value!r}")
        return value

    def duration_ms(self, key: str, default: int) -> int:
        value = self._get(key, False)
        if value is None:
            return default
        try:
            if not isinstance(value, str):
                raise InputError("not text")
            return parse_duration_ms(value)
        except InputError:
            raise ValueError(f"{key}: expected a duration such as 30s, 5m, 2h, got {value!r}") from None

    def argv(self, key: str) -> tuple[str, ...]:
        value = self._get(key, True)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{key}: expected a non-empty list of strings (an argv, not a shell string)")
        return tuple(value)

    def names(self, key: str) -> tuple[str, ...]:
        """A list of environment variable names (empty when absent)."""
        value = self._get(key, False)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ValueError(f"{key}: expected a list of variable names")
        return tuple(value)

    def strings(self, key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        """A list of non-empty strings (``default`` when absent)."""
        value = self._get(key, False)
        if value is None:
            return default
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise ValueError(f"{key}: expected a list of non-empty strings, got {value!r}")
        return tuple(value)

    def str_map(self, key: str) -> dict[str, str]:
        value = self._get(key, False)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ValueError(f"{key}: expected a table of strings")
        return {str(k): v for k, v in value.items()}

    def done(self) -> None:
        unknown = sorted(set(self._raw) - self._seen)
        if unknown:
            raise ValueError(f"unknown option {unknown[0]!r}")
