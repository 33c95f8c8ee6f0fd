"""Merging an approved branch into its base on a real repository: each mode, with
the base checked out (the person's own folder) and without; a conflict leaves all
as it was and names the files; a checkout with local changes is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.code.repos import Repo
from vigil.codework import Worktree
from vigil.errors import GitError
from vigil.merging import Conflict, Merged, merge_branch
from vigil.worktrees import make_worktree


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app", {"parser.py": "one\ntwo\nthree\n", "README.md": "app\n"})


def _worked(repo: Repo, tmp_path: Path, files: dict[str, str], *, task_id: int = 1) -> Worktree:
    made = make_worktree(repo.path, tmp_path / f"w{task_id}", task_id=task_id, subject="fix", base=None)
    repo.commit(files, "the agent's fix", at=Path(made.path))
    return made


@pytest.mark.parametrize("checked_out", [True, False])
@pytest.mark.parametrize("mode", ["ff", "merge", "squash"])
def test_each_mode_lands_the_branch_on_the_base(repo: Repo, tmp_path: Path, mode: str, checked_out: bool) -> None:
    made = _worked(repo, tmp_path, {"parser.py": "one\n2\nthree\n"})
    if not checked_out:
        repo.git("checkout", "--quiet", "-b", "elsewhere")
    before = repo.tip("main")
    merged = merge_branch(made, mode, "Task #1: fix")
    assert isinstance(merged, Merged)
    assert (merged.commit, merged.since, merged.mode) == (repo.tip("main"), before, mode)
    assert repo.show("main", "parser.py") == "one\n2\nthree"
    subjects = repo.log("main")
    if mode == "ff":
        assert merged.commit == repo.tip(made.branch)
        assert subjects[0] == "the agent's fix"
    elif mode == "merge":
        assert subjects[0] == "Task #1: fix"
        assert repo.git("rev-list", "--parents", "-n1", "main").count(" ") == 2  # a merge commit
    else:
        assert subjects[:2] == ["Task #1: fix", "first commit"]  # one commit, the branch's own not on main
    if checked_out:
        assert (repo.path / "parser.py").read_text() == "one\n2\nthree\n"  # the person's folder follows
        assert repo.git("status", "--porcelain") == ""
    listed = [line.split()[0] for line in repo.git("worktree", "list").splitlines()]
    assert listed == [str(repo.path), made.path]  # no throwaway worktree left behind


def test_branch_mode_merges_nothing_and_names_the_branchs_tip(repo: Repo, tmp_path: Path) -> None:
    made = _worked(repo, tmp_path, {"parser.py": "x\n"})
    before = repo.tip("main")
    merged = merge_branch(made, "branch", "unused")
    assert merged == Merged(repo.tip(made.branch), before, "branch")
    assert repo.tip("main") == before


@pytest.mark.parametrize("checked_out", [True, False])
@pytest.mark.parametrize("mode", ["merge", "squash"])
def test_a_conflict_leaves_the_base_as_it_was_and_names_the_files(
    repo: Repo, tmp_path: Path, mode: str, checked_out: bool
) -> None:
    made = _worked(repo, tmp_path, {"parser.py": "one\nTWO (agent)\nthree\n"})
    repo.commit({"parser.py": "one\nTWO (person)\nthree\n"}, "a person's change")
    if not checked_out:
        repo.git("checkout", "--quiet", "-b", "elsewhere")
    before = repo.tip("main")
    result = merge_branch(made, mode, "Task #1: fix")
    assert isinstance(result, Conflict)
    assert result.files == ("parser.py",)
    assert "conflicts in: parser.py" in result.what
    assert made.branch in result.what
    assert repo.tip("main") == before
    assert repo.git("status", "--porcelain") == ""
    assert "(person)" in (repo.path / "parser.py").read_text()


def test_ff_when_the_base_moved_on_asks_for_the_branch_to_catch_up(repo: Repo, tmp_path: Path) -> None:
    made = _worked(repo, tmp_path, {"parser.py": "x\n"})
    repo.commit({"NEWS": "moved\n"}, "main moves on")
    before = repo.tip("main")
    result = merge_branch(made, "ff", "unused")
    assert isinstance(result, Conflict)
    assert result.files == ()
    assert "cannot be fast-forwarded" in result.what
    assert repo.tip("main") == before


def test_uncommitted_changes_in_the_bases_checkout_stop_the_merge(repo: Repo, tmp_path: Path) -> None:
    made = _worked(repo, tmp_path, {"parser.py": "x\n"})
    (repo.path / "README.md").write_text("a person's edit in progress\n")
    before = repo.tip("main")
    with pytest.raises(GitError, match="uncommitted changes; commit or stash them"):
        merge_branch(made, "merge", "m")
    assert repo.tip("main") == before
    assert (repo.path / "README.md").read_text() == "a person's edit in progress\n"


def test_a_branch_already_in_the_base_merges_nothing(repo: Repo, tmp_path: Path) -> None:
    made = _worked(repo, tmp_path, {"parser.py": "x\n"})
    assert isinstance(merge_branch(made, "ff", "m"), Merged)
    again = merge_branch(made, "merge", "m")
    assert again == Merged(repo.tip("main"), repo.tip("main"), "merge")
