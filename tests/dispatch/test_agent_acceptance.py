"""The real `vigil` in subprocesses, with the fake Claude Code as the agent: what a
task says reaches the agent verbatim on stdin, runs nothing, and the agent sees only
its small environment; the dry-run and command executors work from a real home."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from tests.dispatch.agent_support import CLAUDE_FAKE, REPO, recorded

pytestmark = pytest.mark.slow


def use_fake_claude(home: Path, *options: str, extra: str = "") -> None:
    config = home / "vigil.toml"
    command = json.dumps([sys.executable, str(CLAUDE_FAKE), *options])
    config.write_text(
        f'[dispatch]\nexecutor = "claude"\n{extra}\n[executors.claude]\ncommand = {command}\n', encoding="utf-8"
    )


def test_shell_syntax_in_a_subject_reaches_the_agent_verbatim_and_runs_nothing(
    home: Path, vigil: VigilRunner, tmp_path: Path
) -> None:
    record = tmp_path / "record.json"
    use_fake_claude(home, "echo", "--record", str(record))
    subject = "$(touch pwned) `touch pwned2` \"double\" 'single'\nnext line; touch pwned3 && echo $HOME"
    description = "$(touch pwned4)\n'; touch pwned5; '"
    vigil("task", "add", subject, "--description", description, check=True)

    done = vigil("dispatch", "once", env={"VIGIL_TEST_SECRET": "hunter2"})
    assert done.returncode == 0, done.stderr

    seen = recorded(record)
    assert f"Subject: {subject}\n" in seen["stdin"]
    assert f"Description:\n{description}\n" in seen["stdin"]
    assert all(subject not in arg and description not in arg for arg in seen["argv"])
    for folder in (home, tmp_path, Path(seen["cwd"]), REPO):
        assert not any((folder / f"pwned{n}").exists() for n in ("", 2, 3, 4, 5))
    assert "VIGIL_TEST_SECRET" not in seen["env"]
    assert seen["env"]["VIGIL_TASK_ID"] == "1"
    assert seen["env"]["VIGIL_HOME"] == str(home)
    shown = json.loads(vigil("task", "show", "1", "--json", check=True).stdout)
    assert shown["status"] == "completed"
    assert shown["subject"] == subject


def test_a_listed_variable_is_passed_to_the_agent(home: Path, vigil: VigilRunner, tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    use_fake_claude(home, "success", "--record", str(record), extra='pass_env = ["MY_API_KEY"]')
    vigil("task", "add", "hello", check=True)
    assert vigil("dispatch", "once", env={"MY_API_KEY": "k1", "OTHER_KEY": "k2"}).returncode == 0
    env = recorded(record)["env"]
    assert env["MY_API_KEY"] == "k1"
    assert "OTHER_KEY" not in env


def test_dry_run_home_stores_the_prompt_as_the_transcript(home: Path, vigil: VigilRunner) -> None:
    vigil("task", "add", "Look around", "--description", "Nothing to do.", check=True)
    assert vigil("dispatch", "once").returncode == 0
    transcript = home / "logs" / "runs" / "1-1.jsonl"
    (line,) = transcript.read_text(encoding="utf-8").splitlines()
    assert "Subject: Look around" in json.loads(line)["text"]
    shown = json.loads(vigil("task", "show", "1", "--json", check=True).stdout)
    assert shown["status"] == "completed"
    assert shown["result_summary"].startswith("dry run: prompt of ")
    assert shown["cost_usd"] == 0


def test_a_command_skill_runs_from_the_home(home: Path, vigil: VigilRunner) -> None:
    shutil.copytree(REPO / "skills" / "disk-check", home / "skills" / "disk-check")
    vigil("task", "add", "disk", "--skills", "disk-check", "--description", "min_free_percent=0", check=True)
    vigil("task", "add", "disk low", "--skills", "disk-check", "--description", "min_free_percent=101", check=True)
    assert vigil("dispatch", "once").returncode == 0
    assert vigil("dispatch", "once").returncode == 0
    first = json.loads(vigil("task", "show", "1", "--json", check=True).stdout)
    second = json.loads(vigil("task", "show", "2", "--json", check=True).stdout)
    assert first["status"] == "completed"
    assert "% free" in first["result_summary"]
    assert second["status"] == "failed"
    assert "below the 101% minimum" in second["result_summary"]


def test_an_unknown_skill_fails_the_task_clearly(home: Path, vigil: VigilRunner) -> None:
    # `task add` refuses an unknown skill; one removed after the task was added is
    # found when the task runs.
    (home / "skills" / "no-such-skill").mkdir()
    (home / "skills" / "no-such-skill" / "SKILL.md").write_text("---\ndescription: gone soon\n---\nx\n")
    vigil("task", "add", "x", "--skills", "no-such-skill", check=True)
    shutil.rmtree(home / "skills" / "no-such-skill")
    assert vigil("dispatch", "once").returncode == 0
    shown = json.loads(vigil("task", "show", "1", "--json", check=True).stdout)
    assert shown["status"] == "failed"
    assert "unknown skill 'no-such-skill'" in shown["result_summary"]
