"""``Section``: typed access to one TOML table of ``vigil.toml``, each error naming
the file, the table and the key; ``subtable`` reads a table inside another."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vigil.durations import MAX_DURATION_DAYS, parse_duration_ms
from vigil.errors import ConfigError, InputError

MAX_INT = 1_000_000_000  # the largest integer a key takes, unless it says less


def _amount(value: object) -> bool:
    """A number of dollars: finite (TOML has nan and inf) and not negative."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


class Section:
    """Typed access to one TOML table; every error names file and key."""

    def __init__(self, table: Mapping[str, Any], name: str, source: Path | None) -> None:
        self._table = table
        self._name = name
        self._source = source
        self._seen: set[str] = set()

    def _fail(self, key: str, expected: str) -> ConfigError:
        return self.error(f"{key}: expected {expected}, got {self._table[key]!r}")

    def error(self, message: str) -> ConfigError:
        """``message`` (``key: what is wrong``) as an error naming the file and section."""
        where = f"{self._source}: " if self._source else ""
        return ConfigError(f"{where}[{self._name}] {message}")

    def _get(self, key: str) -> Any:
        self._seen.add(key)
        return self._table.get(key)

    def str_(self, key: str, default: str) -> str:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, str) or not value.strip():
            raise self._fail(key, "a non-empty string")
        return value

    def opt_str(self, key: str) -> str | None:
        value = self._get(key)
        if value is not None and not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.str_(key, default)
        if value not in choices:
            raise self._fail(key, "one of " + ", ".join(repr(c) for c in choices))
        return value

    def int_(self, key: str, default: int, minimum: int = 0, maximum: int = MAX_INT) -> int:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            raise self._fail(key, f"an integer ≥ {minimum} (at most {maximum})")
        return value

    def opt_float(self, key: str) -> float | None:
        value = self._get(key)
        if value is None:
            return None
        if not _amount(value):
            raise self._fail(key, "a non-negative number")
        return float(value)

    def bool_(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._fail(key, "true or false")
        return value

    def has(self, key: str) -> bool:
        return key in self._table

    def duration_ms(self, key: str, default: int) -> int:
        value = self._get(key)
        if value is None:
            return default
        expected = f"a duration such as 30s, 5m, 2h, 1d (at most {MAX_DURATION_DAYS}d)"
        if not isinstance(value, str):
            raise self._fail(key, expected)
        try:
            return parse_duration_ms(value)
        except InputError:
            raise self._fail(key, expected) from None

    def argv(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._fail(key, "a list of strings (an argv, not a shell string)")
        if key == "command" and not value:
            raise self._fail(key, "a non-empty list of strings")
        return tuple(value)

    def fractions(self, key: str, default: tuple[float, ...]) -> tuple[float, ...]:
        """A list of numbers in (0, 1], sorted and without repeats."""
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, list) or not all(
            isinstance(f, int | float) and not isinstance(f, bool) and 0 < f <= 1 for f in value
        ):
            raise self._fail(key, "a list of fractions in (0, 1], e.g. [0.5, 0.8, 1.0]")
        return tuple(sorted({float(f) for f in value}))

    def amounts(self, key: str) -> dict[str, float]:
        """A table of name = number ≥ 0 (empty when absent)."""
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(_amount(n) for n in value.values()):
            raise self._fail(key, "a table of name = USD, e.g. feeds = 2.0")
        return {name: float(n) for name, n in value.items()}

    def counts(self, key: str) -> dict[str, int]:
        """A table of name = integer ≥ 0 (empty when absent)."""
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_INT for n in value.values()
        ):
            raise self._fail(key, 'a table of name = count, e.g. "sensor:feeds" = 50')
        return dict(value)

    def done(self) -> None:
        """Raise for keys nobody read: most likely typos."""
        unknown = sorted(set(self._table) - self._seen)
        if unknown:
            where = f"{self._source}: " if self._source else ""
            raise ConfigError(f"{where}[{self._name}] unknown key {unknown[0]!r}")


def subtable(data: Mapping[str, Any], key: str, source: Path | None) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {key}: expected a table [{key}]")
    return value
