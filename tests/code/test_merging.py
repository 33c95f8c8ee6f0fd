"""Landing an approved artifact on its base on a real repository: each mode, with
the base checked out (the person's own folder) and without; a conflict leaves all
as it was and names the files; a checkout with local changes is refused without
suggesting a stash; nothing is ever left half-merged in the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.code.repos import Repo, worked_clone
from vigil.clones import adopted, make_clone, settle
from vigil.codework import Worktree
from vigil.merging import Conflict, Landing, Merged, Unchanged, checkout_problem, land, plan
from vigil.taskdiff import task_diff


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app", {"parser.py": "one\ntwo\nthree\n", "README.md": "app\n"})


def landed(made: Worktree, mode: str) -> Merged | Conflict | Unchanged:
    """Plan and land the task's artifact, as an approval does."""
    assert made.artifact is not None
    result = plan(made, made.artifact, mode, "Task #1: fix")
    if not isinstance(result, Landing):
        return result
    assert checkout_problem(made, result) is None
    return land(made, result)


@pytest.mark.parametrize("checked_out", [True, False])
@pytest.mark.parametrize("mode", ["ff", "merge", "squash"])
def test_each_mode_lands_the_artifact_on_the_base(repo: Repo, tmp_path: Path, mode: str, checked_out: bool) -> None:
    made = worked_clone(repo, tmp_path / "w1", {"parser.py": "one\n2\nthree\n"}, message="the agent's fix")
    assert made.artifact is not None
    if not checked_out:
        repo.git("checkout", "--quiet", "-b", "elsewhere")
    before = repo.tip("main")
    merged = landed(made, mode)
    assert isinstance(merged, Merged)
    assert (merged.commit, merged.since, merged.mode, merged.warning) == (repo.tip("main"), before, mode, None)
    assert repo.show("main", "parser.py") == "one\n2\nthree"
    subjects = repo.log("main")
    if mode == "ff":
        assert merged.commit == made.artifact
        assert subjects[0] == "the agent's fix"
    elif mode == "merge":
        assert subjects[0] == "Task #1: fix"
        assert repo.git("rev-list", "--parents", "-n1", "main").split()[1:] == [before, made.artifact]
    else:
        assert subjects[:2] == ["Task #1: fix", "first commit"]  # one commit, the agent's own not on main
    if checked_out:
        assert (repo.path / "parser.py").read_text() == "one\n2\nthree\n"  # the person's folder follows
        assert repo.git("status", "--porcelain") == ""
    assert not (repo.path / ".git" / "MERGE_HEAD").exists()
    assert repo.git("worktree", "list").count("\n") == 0  # no throwaway worktree, ever


def test_branch_mode_puts_the_artifact_on_the_tasks_branch_and_moves_no_base(repo: Repo, tmp_path: Path) -> None:
    made = worked_clone(repo, tmp_path / "w1", {"parser.py": "x\n"}, message="the agent's fix")
    assert made.artifact is not None
    before = repo.tip("main")
    merged = landed(made, "branch")
    assert merged == Merged(made.artifact, before, "branch")
    assert repo.tip(made.branch) == made.artifact
    assert repo.tip("main") == before


@pytest.mark.parametrize("checked_out", [True, False])
@pytest.mark.parametrize("mode", ["merge", "squash"])
def test_a_conflict_leaves_the_base_as_it_was_and_names_the_files(
    repo: Repo, tmp_path: Path, mode: str, checked_out: bool
) -> None:
    made = worked_clone(repo, tmp_path / "w1", {"parser.py": "one\nTWO (agent)\nthree\n"}, message="the agent's fix")
    assert made.artifact is not None
    repo.commit({"parser.py": "one\nTWO (person)\nthree\n"}, "a person's change")
    if not checked_out:
        repo.git("checkout", "--quiet", "-b", "elsewhere")
    before = repo.tip("main")
    result = landed(made, mode)
    assert isinstance(result, Conflict)
    assert result.files == ("parser.py",)
    assert "conflicts in: parser.py" in result.what
    assert "origin/main" in result.what
    assert repo.tip("main") == before
    assert repo.git("status", "--porcelain") == ""
    assert "(person)" in (repo.path / "parser.py").read_text()


def test_ff_when_the_base_moved_on_asks_for_the_branch_to_catch_up(repo: Repo, tmp_path: Path) -> None:
    made = worked_clone(repo, tmp_path / "w1", {"parser.py": "x\n"}, message="the agent's fix")
    assert made.artifact is not None
    repo.commit({"NEWS": "moved\n"}, "main moves on")
    before = repo.tip("main")
    result = plan(made, made.artifact, "ff", "unused")
    assert isinstance(result, Conflict)
    assert result.files == ()
    assert "cannot be fast-forwarded" in result.what
    assert repo.tip("main") == before


def test_uncommitted_changes_in_the_bases_checkout_stop_the_landing_without_a_stash(repo: Repo, tmp_path: Path) -> None:
    made = worked_clone(repo, tmp_path / "w1", {"parser.py": "x\n"}, message="the agent's fix")
    assert made.artifact is not None
    (repo.path / "README.md").write_text("a person's edit in progress\n")
    result = plan(made, made.artifact, "merge", "m")
    assert isinstance(result, Landing)
    problem = checkout_problem(made, result)
    assert problem is not None
    assert "uncommitted changes to tracked files" in problem
    assert "stash" not in problem
    assert repo.tip("main") == result.old  # planning moved nothing
    assert (repo.path / "README.md").read_text() == "a person's edit in progress\n"


def test_an_artifact_already_in_the_base_merges_nothing_and_an_empty_one_is_unchanged(
    repo: Repo, tmp_path: Path
) -> None:
    made = worked_clone(repo, tmp_path / "w1", {"parser.py": "x\n"}, message="the agent's fix")
    assert made.artifact is not None
    assert isinstance(landed(made, "ff"), Merged)
    assert plan(made, made.artifact, "merge", "m") == Merged(repo.tip("main"), repo.tip("main"), "merge")
    empty = make_clone(repo.path, tmp_path / "w2", task_id=2, subject="nothing", base=None)
    artifact = settle(empty, empty.start, "left").artifact  # the agent changed nothing
    assert artifact == empty.start
    assert isinstance(plan(empty, artifact, "squash", "m"), Unchanged)


def test_landing_again_after_it_moved_the_base_finishes_without_a_second_merge(repo: Repo, tmp_path: Path) -> None:
    made = worked_clone(repo, tmp_path / "w1", {"parser.py": "one\n2\nthree\n"}, message="the agent's fix")
    assert made.artifact is not None
    result = plan(made, made.artifact, "squash", "m")
    assert isinstance(result, Landing)
    repo.git("update-ref", "refs/heads/main", result.new, result.old or "")  # cut short right after the ref moved
    assert repo.git("status", "--porcelain") == "M  parser.py"  # the checkout lags behind
    again = land(made, Landing.from_intent(result.intent()))
    assert again.commit == result.new
    assert again.warning is None
    assert repo.git("status", "--porcelain") == ""
    assert (repo.path / "parser.py").read_text() == "one\n2\nthree\n"
    assert repo.log("main")[:2] == ["m", "first commit"]


def test_a_task_reviewed_on_a_worktrees_branch_before_clones_lands_that_branch(repo: Repo, tmp_path: Path) -> None:
    """A task awaiting review when Vigil was upgraded: its change is its branch's tip."""
    repo.git("worktree", "add", "--quiet", "-b", "vigil/7-fix", str(tmp_path / "work" / "7"))
    tip = repo.commit({"parser.py": "one\nfixed\nthree\n"}, "fix", at=tmp_path / "work" / "7")
    old = Worktree(
        repo=str(repo.path),
        git_dir=str(repo.path / ".git"),
        path=str(tmp_path / "work" / "7"),
        branch="vigil/7-fix",
        base="main",
        start=repo.tip("main"),
    )
    now = adopted(old)
    assert (now.artifact, now.ref) == (tip, "refs/vigil/tasks/7")
    assert [f.path for f in task_diff(old).files] == ["parser.py"]
    assert isinstance(landed(now, "squash"), Merged)
    assert repo.show("main", "parser.py") == "one\nfixed\nthree"
