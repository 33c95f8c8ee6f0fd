"""The slow tier's list names modules and tests that exist: a renamed one would
otherwise drop into the fast tier unnoticed."""

from __future__ import annotations

from tests.conftest import ALONE, REPO, SLOW_TIER


def test_the_slow_tier_names_existing_modules() -> None:
    missing = []
    for entry in (*SLOW_TIER, *ALONE):
        path, _, name = entry.partition("::")
        if not (REPO / path).exists() or (name and f"def {name}(" not in (REPO / path).read_text(encoding="utf-8")):
            missing.append(entry)
    assert missing == []
