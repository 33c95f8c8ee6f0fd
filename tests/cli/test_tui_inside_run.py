"""The agent cannot use the TUI to lift its own guardrails (approve, resume)."""

from __future__ import annotations

import pytest

from tests.conftest import VigilRunner

pytestmark = pytest.mark.slow


def test_tui_that_can_write_is_refused_inside_a_task_run(vigil: VigilRunner) -> None:
    vigil("task", "add", "anything", check=True)
    result = vigil("tui", env={"VIGIL_TASK_ID": "1"})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "vigil: error: only a person can steer the queue from the TUI (use --readonly to watch) "
        "(this command runs inside task #1)"
    )
