"""Defaults for a loop left alone, through the real CLI: what `vigil init` writes and
`vigil doctor` shows, `task add --model`, and skills that must exist (`task add
--skills` and a sensor's tasks)."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

from tests.conftest import VigilRunner
from tests.dispatch.agent_support import CLAUDE_FAKE, recorded


def doctor_lines(vigil: VigilRunner, *args: str) -> dict[str, str]:
    result = vigil(*args, "doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    return {line.split()[1]: line for line in result.stdout.splitlines()}


def test_init_writes_retention_and_a_budget_that_doctor_shows(tmp_path: Path, vigil: VigilRunner) -> None:
    target = tmp_path / "fresh"
    vigil("init", str(target), check=True)
    config = tomllib.loads((target / "vigil.toml").read_text())
    assert config["retention"] == {"keep_finished": "90d", "keep_events": "30d"}  # live keys, not comments
    assert config["budget"] == {"daily_usd": 10.0, "warn_at": [0.5, 0.8, 1.0]}

    lines = doctor_lines(vigil, "--home", str(target))
    assert lines["retention"] == "ok    retention  finished tasks 90d, events 30d, cost archive for ever"
    assert lines["budget"] == (
        "ok    budget     $10.00 per 24 h (priority ≤ 1 still runs above it), warnings at 50%, 80%, 100%"
    )


def test_a_home_without_them_is_warned_about_and_left_as_it_is(home: Path, vigil: VigilRunner) -> None:
    before = (home / "vigil.toml").read_text()
    assert "[retention]" not in before  # a home made before these defaults
    lines = doctor_lines(vigil)
    assert lines["retention"].startswith("warn  retention  off: finished tasks are kept for ever")
    assert lines["budget"].startswith("warn  budget     no daily cap")
    vigil("task", "add", "something", check=True)
    assert (home / "vigil.toml").read_text() == before  # nothing rewrites an existing home


def skill(home: Path, name: str) -> None:
    (home / "skills" / name).mkdir(parents=True)
    (home / "skills" / name / "SKILL.md").write_text(f"---\ndescription: {name}\n---\nDo {name}.\n")


def test_task_add_model_is_stored_shown_and_given_to_the_agent(home: Path, vigil: VigilRunner) -> None:
    argv = json.dumps([sys.executable, str(CLAUDE_FAKE), "success", "--record", str(home / "argv.json")])
    (home / "vigil.toml").write_text(
        f'[dispatch]\nexecutor = "claude"\n\n[executors.claude]\ncommand = {argv}\nmodel = "claude-sonnet-4-5"\n'
    )
    added = json.loads(vigil("task", "add", "hard one", "--model", "claude-opus-4-1", "--json", check=True).stdout)
    assert added["task"]["model"] == "claude-opus-4-1"
    assert "model             claude-opus-4-1" in vigil("task", "show", str(added["id"]), check=True).stdout

    assert vigil("dispatch", "once").returncode == 0
    sent = recorded(home / "argv.json")["argv"]
    assert sent[sent.index("--model") + 1] == "claude-opus-4-1"  # the task's, not [executors.claude]'s

    bad = vigil("task", "add", "x", "--model", "two words")
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "vigil: error: --model: expected a model name such as claude-sonnet-4-5, got 'two words'"
    )


def test_task_add_refuses_a_skill_the_home_does_not_have(home: Path, vigil: VigilRunner) -> None:
    none_yet = vigil("task", "add", "x", "--skills", "triage")
    assert none_yet.returncode == 2
    assert none_yet.stderr.strip() == (
        f"vigil: error: unknown skill 'triage'; this home has no skills ({home / 'skills'})"
    )
    skill(home, "triage")
    skill(home, "web")
    typo = vigil("task", "add", "x", "--skills", "web,triag,mail")
    assert typo.returncode == 2
    assert typo.stderr.strip() == "vigil: error: unknown skills 'triag', 'mail'; skills in this home: triage, web"
    inside = vigil("task", "add", "follow-up", "--skills", "mail", env={"VIGIL_TASK_ID": "1"})
    assert inside.returncode == 2  # the agent's follow-ups too
    assert json.loads(vigil("task", "list", "--json", check=True).stdout)["tasks"] == []
    assert vigil("task", "add", "x", "--skills", "web,triage", check=True).stdout.strip() == "created task #1"


def test_a_sensor_naming_a_missing_skill_is_the_sensors_error(home: Path, vigil: VigilRunner) -> None:
    skill(home, "ops")
    with (home / "vigil.toml").open("a") as toml:
        toml.write('\n[[sensors]]\nuse = "schedule"\nname = "nightly"\nevery = "1h"\nsubject = "Check"\n')
        toml.write('skills = ["ops", "opz"]\n')
    result = vigil("sensors", "run", "nightly")
    assert result.returncode == 1
    assert result.stdout.strip().startswith("nightly: error: task with key 'nightly:")
    assert result.stdout.strip().endswith(": unknown skill 'opz'; skills in this home: ops")
    [row] = json.loads(vigil("sensors", "list", "--json", check=True).stdout)
    assert (row["status"], row["consecutive_failures"]) == ("error", 1)
    assert "unknown skill 'opz'" in row["error"]
    # nothing queued to fail at once
    assert json.loads(vigil("task", "list", "--json", check=True).stdout)["tasks"] == []
