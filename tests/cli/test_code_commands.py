"""The CLI's side of code work: ``vigil task add`` with a repository and checks,
``vigil task diff`` (text, ``--stat``, ``--json``), ``vigil task show`` with the
branch, ``[dispatch]``'s and a skill's code keys and their mistakes."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from tests.code.repos import Repo, worked_clone
from tests.conftest import VigilRunner
from vigil.config import load_settings
from vigil.home import scratch_path
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app", {"parser.py": "one\ntwo\n", "README.md": "app\n"})


def test_task_add_keeps_the_code_options_the_person_gave(
    vigil_in_process: VigilRunner, repo: Repo, tmp_path: Path
) -> None:
    inside = repo.path / "sub"
    inside.mkdir()
    added = vigil_in_process(
        "task", "add", "Fix the parser", "--repo", str(inside), "--base", "main",
        "--check", "pytest -q 'tests/a b.py'", "--check", "ruff check .", "--review", "--merge", "squash",
        "--json", check=True,
    )  # fmt: skip
    code = json.loads(added.stdout)["task"]["code"]
    assert code == {
        "repo": str(repo.path),  # the repository's top folder
        "base": "main",
        "checks": [
            {"command": ["pytest", "-q", "tests/a b.py"], "timeout_ms": None},
            {"command": ["ruff", "check", "."], "timeout_ms": None},
        ],
        "review": True,
        "merge": "squash",
    }
    plain = vigil_in_process("task", "add", "no code", "--json", check=True)
    assert json.loads(plain.stdout)["task"]["code"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--repo", "{tmp}/nowhere"), "does not exist"),
        (("--repo", "{tmp}"), "is not a git repository"),
        (("--repo", "{repo}", "--check", "pytest 'unclosed"), "--check"),
        (("--repo", "{repo}", "--base", "--x"), "--base: expected a branch name"),
        (("--merge", "rebase"), "rebase"),
    ],
)
def test_task_add_refuses_what_cannot_work(
    vigil_in_process: VigilRunner, repo: Repo, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    filled = [a.format(tmp=tmp_path, repo=repo.path) for a in args]
    proc = vigil_in_process("task", "add", "x", *filled)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def _with_worktree(home: Path, repo: Repo, extra: dict[str, str] | None = None) -> tuple[int, str]:
    """A task with a clone on which its 'agent' committed a change (and ``extra``)."""

    async def setup() -> tuple[int, str]:
        store = await SqliteStore.open(load_settings(home).store.path)
        try:
            added = await store.add_task(NewTask("Fix the parser"))
            assert added.task_id is not None
            files = {"parser.py": "one\n2\n", "new.txt": "a\nb\n", **(extra or {})}
            made = worked_clone(repo, scratch_path(home, added.task_id), files, task_id=added.task_id)
            await store.set_worktree(added.task_id, made)
            return added.task_id, made.branch
        finally:
            await store.close()

    return asyncio.run(setup())


def test_task_diff_shows_the_branch_against_its_base(vigil_in_process: VigilRunner, home: Path, repo: Repo) -> None:
    task_id, branch = _with_worktree(home, repo)
    repo.commit({"README.md": "moved on\n"}, "main moves on")
    text = vigil_in_process("task", "diff", str(task_id), check=True).stdout
    assert text.startswith(f"task #{task_id}: {branch} against main")
    assert "+2" in text
    assert "+b" in text
    assert "README" not in text
    stat = vigil_in_process("task", "diff", str(task_id), "--stat", check=True).stdout.splitlines()
    assert stat[1:] == ["  new.txt    +2 -0", "  parser.py  +1 -1", "  2 files changed, +3 -1"]
    report = json.loads(vigil_in_process("task", "diff", str(task_id), "--json", check=True).stdout)
    assert report["files"] == [
        {"path": "new.txt", "added": 2, "removed": 0},
        {"path": "parser.py", "added": 1, "removed": 1},
    ]
    assert (report["branch"], report["base"], report["added"], report["removed"]) == (branch, "main", 3, 1)
    assert "+b" in report["patch"]
    assert "patch" not in json.loads(vigil_in_process("task", "diff", str(task_id), "--stat", "--json").stdout)
    shown = vigil_in_process("task", "show", str(task_id), check=True).stdout
    assert re.search(rf"^branch +{branch} \(from main at [0-9a-f]{{12}}\)$", shown, re.MULTILINE)


def test_task_diff_and_show_list_the_files_to_look_at_first(
    vigil_in_process: VigilRunner, home: Path, repo: Repo
) -> None:
    task_id, _ = _with_worktree(home, repo, {".github/workflows/ci.yml": "on: push\n"})
    text = vigil_in_process("task", "diff", str(task_id), check=True).stdout.splitlines()
    assert text[1:3] == ["look at these first:", "  ! .github/workflows/ci.yml  (a CI workflow (runs on push))"]
    assert text[3].startswith("diff --git")
    shown = vigil_in_process("task", "show", str(task_id), check=True).stdout
    assert re.search(r"^look first +! \.github/workflows/ci\.yml  \(a CI workflow", shown, re.MULTILINE)
    listed = json.loads(vigil_in_process("task", "show", str(task_id), "--json", check=True).stdout)["flagged"]
    assert listed == [{"path": ".github/workflows/ci.yml", "why": "a CI workflow (runs on push)"}]


def test_task_diff_of_a_task_without_a_branch_says_so(vigil_in_process: VigilRunner) -> None:
    vigil_in_process("task", "add", "no repository", check=True)
    proc = vigil_in_process("task", "diff", "1")
    assert proc.returncode == 2
    assert "task #1 has no change" in proc.stderr


def test_code_keys_in_vigil_toml_and_a_skill(vigil_in_process: VigilRunner, home: Path, repo: Repo) -> None:
    config = home / "vigil.toml"
    keys = f'repo = "{repo.path}"\nchecks = [["pytest"], {{command = ["ruff"], timeout = "2m"}}]\nmerge = "ff"\n'
    config.write_text(config.read_text().replace("[dispatch]\n", "[dispatch]\n" + keys, 1))
    settings = load_settings(home)
    assert settings.dispatch.code.merge == "ff"
    assert [c.timeout_ms for c in settings.dispatch.code.checks or ()] == [None, 120_000]
    config.write_text(config.read_text().replace('merge = "ff"', 'merge = "rebase"'))
    proc = vigil_in_process("task", "list")
    assert proc.returncode == 2
    assert (
        "[dispatch] merge: expected one of 'ff', 'merge', 'squash', 'branch', 'pull_request', got 'rebase'"
        in proc.stderr
    )
