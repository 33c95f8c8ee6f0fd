"""Codex's own API retries, seen live through ``RunContext.on_progress`` while the
real codex runs (the executor driven directly, against the local model server)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dispatch.agents.codex.executor import CodexExecutor
from dispatch.executors import RunContext
from tests.agents.clis import codex_path, needs_codex
from tests.agents.codex_home import TEST_KEY
from tests.agents.model_server import Slow, Text
from tests.agents.openai_api import codex_config, openai_server, server_error
from tests.dispatch.agent_support import Started, agent_settings, make_task
from vigil.home import init_home
from vigil.models import OutcomeKind

pytestmark = [needs_codex, pytest.mark.slow]


async def test_a_retry_shows_while_it_happens_and_is_no_error_once_the_run_succeeds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    settings = agent_settings(home, executors={"codex": {"command": [str(codex_path())]}})
    transcript = home / "logs" / "runs" / "1-1.jsonl"
    notes: list[tuple[str | None, bool]] = []  # (note, whether a turn had completed by then)

    def on_progress(note: str | None) -> None:
        notes.append((note, transcript.exists() and "turn.completed" in transcript.read_text()))

    with openai_server() as api:
        codex_config(tmp_path / "codex-home", api.server.url)
        api.script.add(server_error(), Slow(1.5, Text("Recovered.")))
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "CODEX_HOME": str(tmp_path / "codex-home"),
            "OPENAI_API_KEY": TEST_KEY,
        }
        ctx = RunContext(
            home=home,
            run_id=1,
            attempt=1,
            prompt="Say hello.",
            timeout_s=60,
            transcript_path=transcript,
            env=env,
            model=None,
            command=None,
            on_process_start=Started(),
            on_progress=on_progress,
        )
        outcome = await CodexExecutor(settings).run(make_task(id=1), ctx)

    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.error is None
    assert outcome.summary == "Recovered."
    first_note, turn_done = notes[0]
    assert first_note is not None
    assert first_note.startswith("API retry 1/1: ")
    assert "high demand" in first_note
    assert not turn_done  # seen while the run was still going
    assert notes[-1][0] is None  # cleared once Codex moved on
