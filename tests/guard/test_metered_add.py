"""Through the CLI (in this process): a cap its runs could not be metered against
is refused when the task is added, with the reason; an agent's task added from
inside its run is held to its parent's priority, and says so; the floor's key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from vigil.config import load_settings
from vigil.errors import ConfigError


def _executor(home: Path, executor: str, extra: str = "") -> None:
    config = home / "vigil.toml"
    text = config.read_text(encoding="utf-8").replace('executor = "dry-run"', f'executor = "{executor}"')
    config.write_text(text + "\n" + extra, encoding="utf-8")


def test_a_cap_that_cannot_be_metered_is_refused_when_the_task_is_added(
    vigil_in_process: VigilRunner, home: Path
) -> None:
    _executor(home, "codex")
    refused = vigil_in_process("task", "add", "capped", "--max-cost", "0.2", "--model", "house-model-1")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip() == (
        "vigil: error: refused: a cap of $0.20 cannot be metered: model 'house-model-1' has no price "
        "(add [prices.'house-model-1'], USD per million tokens) and codex reports no cost of its own"
    )
    assert json.loads(vigil_in_process("task", "list", "--json", check=True).stdout)["tasks"] == []
    # priced (by the table, by its family, or by [prices]), or without a cap: added
    vigil_in_process("task", "add", "priced", "--max-cost", "0.2", "--model", "gpt-5.4", check=True)
    vigil_in_process("task", "add", "a family's price", "--max-cost", "0.2", "--model", "gpt-7", check=True)
    vigil_in_process("task", "add", "no cap", "--model", "house-model-1", check=True)


def test_claude_codes_own_figure_meters_a_cap_on_any_model(vigil_in_process: VigilRunner, home: Path) -> None:
    _executor(home, "claude")
    vigil_in_process("task", "add", "capped", "--max-cost", "0.2", "--model", "house-model-1", check=True)


def test_an_agents_task_added_in_its_run_is_held_to_its_parents_priority(
    vigil_in_process: VigilRunner, home: Path
) -> None:
    vigil_in_process("task", "add", "the person's task", "--priority", "4", check=True)
    added = vigil_in_process("task", "add", "me first", "--priority", "1", env={"VIGIL_TASK_ID": "1"}, check=True)
    assert added.stdout == (
        "created task #2 (priority 4, not 1: a task an agent adds is never more urgent than its parent or "
        "[limits] agent_priority_floor (its parent, task #1, has priority 4))\n"
    )
    assert json.loads(vigil_in_process("task", "show", "2", "--json", check=True).stdout)["priority"] == 4


def test_the_agent_priority_floor_is_a_priority(home: Path) -> None:
    config = home / "vigil.toml"
    base = config.read_text(encoding="utf-8")
    config.write_text(base + "\n[limits]\nagent_priority_floor = 3\n", encoding="utf-8")
    assert load_settings(home).limits.agent_priority_floor == 3
    config.write_text(base + "\n[limits]\nagent_priority_floor = 10\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="agent_priority_floor"):
        load_settings(home)
