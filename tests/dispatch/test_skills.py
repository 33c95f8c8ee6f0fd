"""Loading skills: SKILL.md front matter, name checks, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.skills import Skill, load_skill, load_skills
from tests.dispatch.agent_support import REPO
from vigil.config import Settings
from vigil.errors import InputError, SkillError
from vigil.home import skill_names
from vigil.models import Task


def write(skills: Path, name: str, text: str) -> Path:
    folder = skills / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


def test_a_full_skill_loads(tmp_path: Path) -> None:
    folder = write(
        tmp_path,
        "report",
        "---\nname: report\ndescription: Makes a report.\nexecutor: command\nmodel: m1\ntimeout: 90s\n"
        'command: ["python3", "./make.py", "--flag", "/abs/x"]\nrequires_approval: true\n---\n\n# Steps\n\nDo it.\n',
    )
    skill = load_skill(tmp_path, "report")
    assert skill.name == "report"
    assert skill.description == "Makes a report."
    assert skill.body == "# Steps\n\nDo it."
    assert skill.folder == folder
    assert skill.executor == "command"
    assert skill.model == "m1"
    assert skill.timeout_ms == 90_000
    assert skill.command == ("python3", str(folder / "make.py"), "--flag", "/abs/x")
    assert skill.requires_approval is True


def test_a_skill_may_say_how_its_tasks_work_on_a_repository(tmp_path: Path) -> None:
    write(
        tmp_path,
        "fix",
        "---\ndescription: Fixes a failing test.\nrepo: ~/src/app\nbase: main\n"
        "checks:\n  - [pytest, -q]\n  - {command: [ruff, check, .], timeout: 2m}\nreview: true\nmerge: squash\n---\n",
    )
    code = load_skill(tmp_path, "fix").code
    assert (code.repo, code.base, code.review, code.merge) == ("~/src/app", "main", True, "squash")
    assert [(c.argv, c.timeout_ms) for c in code.checks or ()] == [
        (("pytest", "-q"), None),
        (("ruff", "check", "."), 120_000),
    ]
    write(tmp_path, "plain", "---\ndescription: d\n---\n")
    assert load_skill(tmp_path, "plain").code.empty


def test_defaults_and_command_implies_the_command_executor(tmp_path: Path) -> None:
    write(tmp_path, "plain", "---\ndescription: d\n---\nbody\n")
    plain = load_skill(tmp_path, "plain")
    assert (plain.executor, plain.model, plain.timeout_ms, plain.command, plain.requires_approval) == (
        None, None, None, None, False,
    )  # fmt: skip
    write(tmp_path, "cmd", '---\ndescription: d\ncommand: ["true"]\n---\n')
    assert load_skill(tmp_path, "cmd").executor == "command"


@pytest.mark.parametrize("name", ["../etc", "a/b", "", "Upper", ".hidden", "-x", "a b", "..", "x" * 65, "é"])
def test_invalid_names_are_refused_before_touching_the_disk(tmp_path: Path, name: str) -> None:
    with pytest.raises(SkillError, match="invalid skill name"):
        load_skill(tmp_path, name)


def test_unknown_skill(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match="unknown skill 'nope'"):
        load_skill(tmp_path, "nope")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no front matter\n", "must start with YAML front matter"),
        ("---\ndescription: d\n", "no closing '---'"),
        ("---\ndescription: [unclosed\n---\n", "not valid YAML"),
        ("---\n- a list\n---\n", "must be a mapping"),
        ("---\nname: s\n---\n", "description: required"),
        ("---\ndescription: d\nexecuter: claude\n---\n", "unknown front matter key 'executer'"),
        ("---\nname: other\ndescription: d\n---\n", "does not match the folder name"),
        ("---\ndescription: d\nexecutor: gpt\n---\n", "executor: expected one of"),
        ("---\ndescription: d\nexecutor: command\n---\n", "no command is given"),
        ("---\ndescription: d\ncommand: rm -rf /\n---\n", "not a shell string"),
        ("---\ndescription: d\ncommand: ['./../../bin/x']\n---\n", "must stay inside"),
        ("---\ndescription: d\ntimeout: 10\n---\n", "timeout: expected a duration"),
        ("---\ndescription: d\ntimeout: 0s\n---\n", "longer than zero"),
        ("---\ndescription: d\nrequires_approval: 'yes'\n---\n", "requires_approval: expected true or false"),
        ("---\ndescription: 42\n---\n", "description: expected a non-empty string"),
        ("---\ndescription: d\nmerge: rebase\n---\n", "merge: expected one of 'ff', 'merge', 'squash', 'branch'"),
        ("---\ndescription: d\nchecks: pytest -q\n---\n", "checks: expected a list of checks"),
        ("---\ndescription: d\nchecks: [{command: [pytest], every: 2m}]\n---\n", "unknown key 'every' in a check"),
        ("---\ndescription: d\nreview: maybe\n---\n", "review: expected true or false"),
    ],
)
def test_malformed_skill_files_are_clear_input_errors(tmp_path: Path, text: str, message: str) -> None:
    write(tmp_path, "s", text)
    with pytest.raises(SkillError, match=message) as err:
        load_skill(tmp_path, "s")
    assert isinstance(err.value, InputError)
    assert "\n" not in str(err.value)


def test_load_skills_keeps_order_drops_repeats_and_stops_at_the_first_bad_one(tmp_path: Path) -> None:
    write(tmp_path, "a", "---\ndescription: A\n---\n")
    write(tmp_path, "b", "---\ndescription: B\n---\n")
    assert [s.name for s in load_skills(tmp_path, ["b", "a", "b"])] == ["b", "a"]
    with pytest.raises(SkillError, match="unknown skill 'c'"):
        load_skills(tmp_path, ["a", "c"])
    assert load_skills(tmp_path, []) == []


def test_the_shipped_example_skills_load() -> None:
    names = skill_names(REPO / "skills")
    assert {"triage-inbox", "summarise-feed-entry", "disk-check"} <= set(names)
    for skill in load_skills(REPO / "skills", names):
        assert skill.description
        assert skill.body
    disk = load_skill(REPO / "skills", "disk-check")
    assert disk.executor == "command"
    assert disk.command is not None
    assert Path(disk.command[1]).is_file()


def test_a_bom_and_windows_line_endings_are_fine(tmp_path: Path) -> None:
    folder = tmp_path / "win"
    folder.mkdir()
    (folder / "SKILL.md").write_bytes("\ufeff---\r\ndescription: From Windows\r\n---\r\nBody.\r\n".encode())
    skill = load_skill(tmp_path, "win")
    assert skill.description == "From Windows"
    assert skill.body.strip() == "Body."


def test_an_edited_skill_is_seen_by_the_next_load(tmp_path: Path) -> None:
    """Skills are read from disk at each load: an edit reaches the next task."""
    folder = write(tmp_path, "s", "---\ndescription: First.\n---\nold body\n")
    assert load_skill(tmp_path, "s").body == "old body"

    (folder / "SKILL.md").write_text("---\ndescription: Second.\nrequires_approval: true\n---\nnew body\n")

    skill = load_skill(tmp_path, "s")
    assert (skill.description, skill.body, skill.requires_approval) == ("Second.", "new body", True)


def test_a_skill_broken_by_an_edit_is_refused_though_it_loaded_before(tmp_path: Path) -> None:
    folder = write(tmp_path, "s", "---\ndescription: Fine.\n---\nbody\n")
    load_skill(tmp_path, "s")

    (folder / "SKILL.md").write_text("no front matter at all\n")

    with pytest.raises(SkillError, match="front matter"):
        load_skill(tmp_path, "s")


def test_the_workspace_is_the_tasks_then_the_skills_then_the_configs_else_scratch(tmp_path: Path) -> None:
    from dataclasses import replace

    from dispatch.workspace import Workspace, workspace_of
    from tests.dispatch.agent_support import BASE_TASK, agent_settings

    def workdir_of(task: Task, skills: list[Skill], settings: Settings) -> Path | None:
        workspace = workspace_of(task, skills, settings)
        return None if workspace.scratch else workspace.path

    home = tmp_path / "home"
    write(home / "skills", "in-repo", "---\ndescription: Works in the repo.\nworkdir: repo\n---\nGo.\n")
    write(home / "skills", "plain", "---\ndescription: Anywhere.\n---\nGo.\n")
    repo, plain = load_skill(home / "skills", "in-repo"), load_skill(home / "skills", "plain")
    assert repo.workdir == "repo"
    settings = agent_settings(home)
    assert workdir_of(BASE_TASK, [plain], settings) is None  # a scratch folder of its own
    assert workspace_of(BASE_TASK, [plain], settings) == Workspace(home / "work" / str(BASE_TASK.id), scratch=True)
    configured = agent_settings(home, dispatch={"workdir": "~/work"})
    assert workdir_of(BASE_TASK, [plain], configured) == Path("~/work").expanduser().resolve()
    assert workdir_of(BASE_TASK, [plain, repo], configured) == (home / "repo").resolve()
    own = replace(BASE_TASK, workdir="/srv/elsewhere")
    assert workdir_of(own, [repo], configured) == Path("/srv/elsewhere")
