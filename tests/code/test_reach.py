"""``vigil doctor``'s reach lines name a ``[dispatch] repo``: the agent's sandbox
lets it write into that repository's git folder, to commit on its branch."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.exposure import widenings
from vigil.codework import CodeOptions
from vigil.config import load_settings


@pytest.mark.parametrize(
    ("executor", "said"),
    [("claude", "but its hooks and configuration"), ("codex", "the vigil/ branches"), ("dry-run", None)],
)
def test_a_configured_repository_is_a_reach_line(home: Path, executor: str, said: str | None) -> None:
    settings = load_settings(home)
    assert widenings(settings, {}) == []
    code = CodeOptions(repo="/src/app")
    settings = replace(settings, dispatch=replace(settings.dispatch, executor=executor, code=code))
    lines = [line for line in widenings(settings, {}) if "repo" in line]
    if said is None:
        assert lines == []
        return
    (line,) = lines
    assert line.startswith("[dispatch] repo /src/app: to commit on its branch the agent ")
    assert said in line
