"""A task's worktree on a real repository: made on its own branch from the base,
reused, summed up after a run, diffed, removed; and git run by Vigil in it never
runs what the agent could have planted."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.code.repos import Repo
from vigil import git
from vigil.errors import RepositoryError
from vigil.worktrees import (
    branch_diff,
    branch_name,
    in_worktree,
    make_worktree,
    remove_worktree,
    reuse_worktree,
    settle,
    tips,
    writable_git_dirs,
)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app", {"parser.py": "def parse(x):\n    return x\n", "README.md": "app\n"})


def test_branch_names_carry_the_task_id_and_a_slug_of_its_subject() -> None:
    assert branch_name(7, "Fix the parser: it drops `$HOME`!") == "vigil/7-fix-the-parser-it-drops-home"
    assert branch_name(8, "???") == "vigil/8"
    long = branch_name(9, "word " * 30)
    assert long.startswith("vigil/9-word-word")
    assert len(long) <= len("vigil/9-") + 40


def test_a_worktree_is_made_on_a_new_branch_from_the_current_branch(repo: Repo, tmp_path: Path) -> None:
    path = tmp_path / "home" / "work" / "3"
    made = make_worktree(repo.path, path, task_id=3, subject="Fix the parser", base=None)
    assert (made.branch, made.base, made.start) == ("vigil/3-fix-the-parser", "main", repo.tip("main"))
    assert (made.repo, made.git_dir, made.path) == (str(repo.path), str(repo.path / ".git"), str(path))
    assert Path(made.admin).parent == repo.path / ".git" / "worktrees"
    assert (path / "parser.py").read_text() == "def parse(x):\n    return x\n"
    assert repo.git("branch", "--show-current", cwd=path) == made.branch
    assert repo.git("branch", "--show-current") == "main"  # the person's checkout is left alone


def test_a_named_base_and_a_parents_branch_are_where_branches_start(repo: Repo, tmp_path: Path) -> None:
    repo.git("branch", "release")
    repo.commit({"NEWS": "main moved on\n"}, "on main")
    made = make_worktree(repo.path, tmp_path / "w1", task_id=1, subject="on release", base="release")
    assert (made.base, made.start) == ("release", repo.tip("release"))
    parent = repo.commit({"parser.py": "fixed\n"}, "the parent's fix", at=Path(made.path))
    child = make_worktree(
        repo.path, tmp_path / "w2", task_id=2, subject="follow up", base="release", start_branch=made.branch
    )
    assert (child.base, child.start) == ("release", parent)
    assert (Path(child.path) / "parser.py").read_text() == "fixed\n"
    gone = make_worktree(repo.path, tmp_path / "w3", task_id=3, subject="x", base=None, start_branch="vigil/gone")
    assert gone.start == repo.tip("main")  # a parent's branch that is gone: from the base


def test_a_branch_name_another_home_took_gets_a_suffix(repo: Repo, tmp_path: Path) -> None:
    repo.git("branch", "vigil/4-same")
    made = make_worktree(repo.path, tmp_path / "w", task_id=4, subject="same", base=None)
    assert made.branch == "vigil/4-same-2"


@pytest.mark.parametrize(
    ("where", "base", "message"),
    [
        ("missing", None, "does not exist"),
        ("plain", None, "is not a git repository"),
        ("repo", "nope", "base branch 'nope' does not exist"),
    ],
)
def test_a_repository_that_cannot_be_used_is_a_clear_error(
    repo: Repo, tmp_path: Path, where: str, base: str | None, message: str
) -> None:
    folder = {"missing": tmp_path / "missing", "plain": tmp_path / "plain", "repo": repo.path}[where]
    if where == "plain":
        folder.mkdir()
    with pytest.raises(RepositoryError, match=message):
        make_worktree(folder, tmp_path / "w", task_id=1, subject="x", base=base)
    assert not (tmp_path / "w").exists()


def test_a_detached_head_needs_a_named_base(repo: Repo, tmp_path: Path) -> None:
    repo.git("checkout", "--quiet", "--detach")
    with pytest.raises(RepositoryError, match="HEAD is detached"):
        make_worktree(repo.path, tmp_path / "w", task_id=1, subject="x", base=None)


def test_settle_commits_what_was_left_and_counts_what_the_run_added(repo: Repo, tmp_path: Path) -> None:
    made = make_worktree(repo.path, tmp_path / "w", task_id=5, subject="fix", base=None)
    before = tips(made)
    repo.commit({"parser.py": "def parse(x):\n    return int(x)\n"}, "parse numbers", at=Path(made.path))
    left = {"test_parser.py": "assert True\n", "parser.py": "def parse(x):\n    return int(x.strip())\n"}
    repo.write(left, at=Path(made.path))
    changes, moved = settle(made, before, "left by attempt 1")
    assert moved is None
    assert changes.dirty
    assert [c.split(" ", 1)[1] for c in changes.commits] == ["parse numbers", "left by attempt 1"]
    assert (changes.branch, changes.head) == (made.branch, repo.tip(made.branch))
    assert (changes.files, changes.insertions, changes.deletions) == (2, 2, 1)
    assert not git.dirty(in_worktree(made))
    again, _ = settle(made, tips(made), "nothing")
    assert (again.commits, again.dirty, again.files) == ((), False, 2)


def test_the_base_moved_onto_the_branch_during_a_run_is_a_denial(repo: Repo, tmp_path: Path) -> None:
    made = make_worktree(repo.path, tmp_path / "w", task_id=6, subject="fix", base=None)
    before = tips(made)
    tip = repo.commit({"parser.py": "mine\n"}, "merged past review", at=Path(made.path))
    repo.git("update-ref", "refs/heads/main", tip)
    _, moved = settle(made, before, "x")
    assert moved is not None
    assert "main was moved during the run" in moved
    # someone else's commit on the base is no business of the agent's
    other = make_worktree(repo.path, tmp_path / "w2", task_id=7, subject="other", base=None)
    before = tips(other)
    repo.commit({"parser.py": "mine too\n"}, "agent work", at=Path(other.path))
    repo.git("checkout", "--quiet", "--force", "main")
    repo.commit({"NEWS": "a person's commit\n"}, "person")
    assert settle(other, before, "x")[1] is None


def test_a_worktree_whose_folder_is_gone_is_made_again_from_its_branch(repo: Repo, tmp_path: Path) -> None:
    made = make_worktree(repo.path, tmp_path / "w", task_id=8, subject="fix", base=None)
    repo.commit({"parser.py": "kept\n"}, "kept work", at=Path(made.path))
    assert reuse_worktree(made) == made
    remove_worktree(made, delete_branch=False)
    assert not Path(made.path).exists()
    again = reuse_worktree(made)
    assert (Path(again.path) / "parser.py").read_text() == "kept\n"
    remove_worktree(again, delete_branch=True)
    with pytest.raises(RepositoryError, match="no longer exists"):
        reuse_worktree(again)


def test_removing_a_worktree_keeps_its_branch_unless_told(repo: Repo, tmp_path: Path) -> None:
    made = make_worktree(repo.path, tmp_path / "w", task_id=9, subject="fix", base=None)
    repo.write({"scratch.txt": "uncommitted\n"}, at=Path(made.path))
    remove_worktree(made, delete_branch=False)
    assert not Path(made.path).exists()
    assert str(made.path) not in repo.git("worktree", "list")
    assert git.branch_exists(git.Checkout(repo.path), made.branch)
    other = make_worktree(repo.path, tmp_path / "w2", task_id=10, subject="other", base=None)
    remove_worktree(other, delete_branch=True)
    assert not git.branch_exists(git.Checkout(repo.path), other.branch)


def test_the_diff_is_against_where_the_branch_met_the_base(repo: Repo, tmp_path: Path) -> None:
    made = make_worktree(repo.path, tmp_path / "w", task_id=11, subject="fix", base=None)
    repo.commit({"parser.py": "def parse(x):\n    return int(x)\n", "new.txt": "a\nb\n"}, "fix", at=Path(made.path))
    repo.commit({"README.md": "app, moved on\n"}, "main moves on")  # not part of the task's diff
    diff = branch_diff(made)
    assert [(f.path, f.added, f.removed) for f in diff.files] == [("new.txt", 2, 0), ("parser.py", 1, 1)]
    assert (diff.added, diff.removed) == (3, 1)
    assert "+    return int(x)" in diff.patch
    assert "README" not in diff.patch
    assert branch_diff(made, with_patch=False).patch == ""
    merged = replace(made, merge="squash", merged=repo.tip(made.branch), merged_from=made.start)
    assert [f.path for f in branch_diff(merged).files] == ["new.txt", "parser.py"]


def test_the_sandbox_may_write_the_branchs_folders_not_the_configuration(repo: Repo, tmp_path: Path) -> None:
    made = make_worktree(repo.path, tmp_path / "w", task_id=12, subject="fix", base=None)
    dirs = writable_git_dirs(made)
    git_dir = repo.path / ".git"
    assert dirs == (
        Path(made.admin),
        git_dir / "objects",
        git_dir / "refs" / "heads" / "vigil",
        git_dir / "logs" / "refs" / "heads" / "vigil",
    )
    assert all(d.is_dir() for d in dirs)


def test_git_run_by_vigil_follows_the_recorded_folders_and_runs_no_hook(repo: Repo, tmp_path: Path) -> None:
    """What an agent could plant: a hook in the repository, and the worktree's .git
    file pointed at a repository of its own whose configuration runs a command.
    Settling the run (status, add, commit) runs neither."""
    made = make_worktree(repo.path, tmp_path / "w", task_id=13, subject="fix", base=None)
    ran = tmp_path / "ran"
    hook = repo.path / ".git" / "hooks" / "post-commit"  # --no-verify would not skip this one
    hook.write_text(f"#!/bin/sh\ntouch {ran}-hook\n")
    hook.chmod(0o755)
    evil = Repo.make(Path(made.path) / "planted")
    evil.git("config", "core.fsmonitor", f"touch {ran}-fsmonitor; false")
    (Path(made.path) / ".git").write_text(f"gitdir: {evil.path / '.git'}\n")
    (Path(made.path) / "parser.py").write_text("changed\n")
    changes, _ = settle(made, tips(made), "left")
    assert changes.dirty
    assert len(changes.commits) == 1
    assert not list(tmp_path.glob("ran*"))
    assert repo.show(made.branch, "parser.py") == "changed"
