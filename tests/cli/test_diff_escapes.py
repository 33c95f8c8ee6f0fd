"""``vigil task diff`` shows the terminal escapes an agent wrote into a file as
text (``\\x1b]52;…``), never as the bytes a terminal would obey."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.agent_escapes import CLIPBOARD, ESC, TITLE, task_with_escapes
from tests.code.repos import Repo
from tests.conftest import VigilRunner

pytestmark = pytest.mark.slow  # a real loop run through the real vigil


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app", {"README.md": "app\n"})


def test_task_diff_shows_an_agents_escapes_as_text(home: Path, repo: Repo, vigil: VigilRunner) -> None:
    task_id = task_with_escapes(home, repo, vigil)
    shown = vigil("task", "diff", str(task_id), check=True).stdout
    assert ESC not in shown
    assert "\x07" not in shown
    assert f"+clipboard \\x1b]52;c;{CLIPBOARD}\\x07 and title \\x1b]0;{TITLE}\\x07 end" in shown
    stat = vigil("task", "diff", str(task_id), "--stat", check=True).stdout
    assert "notes.txt  +1 -0" in stat
    # JSON keeps the content exactly, escaped as JSON escapes it
    patch = json.loads(vigil("task", "diff", str(task_id), "--json", check=True).stdout)["patch"]
    assert f"{ESC}]52;c;{CLIPBOARD}\x07" in patch
