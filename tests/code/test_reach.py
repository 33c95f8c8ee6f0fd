"""``vigil doctor``'s reach lines name a ``[dispatch] repo``: the agent reads it
and writes only a clone of its own."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.agents.doctor import reach_findings, run_briefly, widenings
from tests.agents.clis import needs_bwrap
from vigil.codework import CodeOptions
from vigil.config import load_settings


@pytest.mark.parametrize(
    ("executor", "said"),
    [("claude", "writes only a clone of its own"), ("codex", "writes only a clone of its own"), ("dry-run", None)],
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
    assert line.startswith("[dispatch] repo /src/app: the agent can read it")
    assert said in line


def test_checks_outside_their_sandbox_are_a_reach_line(home: Path) -> None:
    settings = load_settings(home)
    settings = replace(settings, dispatch=replace(settings.dispatch, executor="codex", check_sandbox=False))
    assert widenings(settings, {}) == [
        "[dispatch] check_sandbox is off: a task's checks run the agent's code, able to write the home"
    ]


async def test_doctor_warns_when_checks_cannot_be_sandboxed(home: Path) -> None:
    settings = load_settings(home)
    settings = replace(settings, dispatch=replace(settings.dispatch, executor="codex"))
    found = {f.what: (f.level, f.detail) for f in await reach_findings(settings, {"PATH": "/nowhere"}, run_briefly)}
    level, detail = found["checks"]
    assert level == "warn"
    assert detail.startswith("bwrap not found: a task's checks (code the agent wrote) run unconfined")


@needs_bwrap
async def test_doctor_says_checks_run_in_bubblewrap(home: Path) -> None:
    settings = load_settings(home)
    settings = replace(settings, dispatch=replace(settings.dispatch, executor="codex"))
    found = {f.what: (f.level, f.detail) for f in await reach_findings(settings, dict(os.environ), run_briefly)}
    level, detail = found["checks"]
    assert level == "ok"
    assert detail == (
        "a task's checks run in bubblewrap, writing only the workspace, without network ([checks] network = true "
        "allows it)"
    )
