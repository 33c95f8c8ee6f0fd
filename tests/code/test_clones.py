"""A task's clone on a real repository: made afresh for each attempt on its own
branch, what the agent left taken out as the task's artifact (read as data: no
hook, filter, monitor, HEAD or commondir indirection of the clone's runs or
steers anything), removed by retention."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from tests.code.repos import Repo
from vigil import git
from vigil.clones import branch_name, make_clone, read_head, remove_clone, renew_clone, retire, settle, task_ref
from vigil.errors import RepositoryError


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app", {"parser.py": "def parse(x):\n    return x\n", "README.md": "app\n"})


def operator_state(repo: Repo) -> dict[str, str]:
    """What no agent may change in the operator's repository: every ref but the
    Vigil ones, the index, the configuration, hooks and info/."""
    git_dir = repo.path / ".git"
    refs = repo.git("for-each-ref", "--format=%(refname) %(objectname)")
    state = {"refs": "\n".join(line for line in refs.splitlines() if not line.startswith("refs/vigil/"))}
    for name in ("index", "config", "HEAD"):
        state[name] = (git_dir / name).read_bytes().hex()
    for folder in ("hooks", "info"):
        for path in sorted((git_dir / folder).rglob("*")):
            state[str(path)] = path.read_bytes().hex() if path.is_file() else "dir"
    return state


def test_branch_names_carry_the_task_id_and_a_slug_of_its_subject() -> None:
    assert branch_name(7, "Fix the parser: it drops `$HOME`!") == "vigil/7-fix-the-parser-it-drops-home"
    assert branch_name(8, "???") == "vigil/8"
    long = branch_name(9, "word " * 30)
    assert long.startswith("vigil/9-word-word")
    assert len(long) <= len("vigil/9-") + 40


def test_a_clone_of_its_own_is_made_on_the_tasks_branch_borrowing_the_objects(repo: Repo, tmp_path: Path) -> None:
    path = tmp_path / "home" / "work" / "3"
    made = make_clone(repo.path, path, task_id=3, subject="Fix the parser", base=None)
    assert (made.branch, made.base, made.start, made.ref) == (
        "vigil/3-fix-the-parser",
        "main",
        repo.tip("main"),
        "refs/vigil/tasks/3",
    )
    assert (made.repo, made.git_dir, made.path, made.artifact) == (
        str(repo.path),
        str(repo.path / ".git"),
        str(path),
        None,
    )
    assert (path / ".git").is_dir()  # a repository of its own, not a worktree of the operator's
    assert (path / "parser.py").read_text() == "def parse(x):\n    return x\n"
    assert repo.git("branch", "--show-current", cwd=path) == made.branch
    alternates = (path / ".git" / "objects" / "info" / "alternates").read_text()
    assert alternates.strip() == str(repo.path / ".git" / "objects")
    assert repo.git("config", "user.name", cwd=path) == "Test Person"  # the agent's commits carry it
    assert repo.git("worktree", "list").count("\n") == 0  # no worktree of the operator's
    assert repo.git("branch", "--list", "vigil/*") == ""  # nor a branch in it


def test_a_named_base_and_a_parents_artifact_are_where_tasks_start(repo: Repo, tmp_path: Path) -> None:
    repo.git("branch", "release")
    repo.commit({"NEWS": "main moved on\n"}, "on main")
    made = make_clone(repo.path, tmp_path / "w1", task_id=1, subject="on release", base="release")
    assert (made.base, made.start) == ("release", repo.tip("release"))
    repo.commit({"parser.py": "fixed\n"}, "the parent's fix", at=Path(made.path))
    parent = settle(made, made.start, "left").artifact
    child = make_clone(repo.path, tmp_path / "w2", task_id=2, subject="follow up", base="release", start_commit=parent)
    assert (child.base, child.start) == ("release", parent)
    assert (Path(child.path) / "parser.py").read_text() == "fixed\n"
    gone = make_clone(repo.path, tmp_path / "w3", task_id=3, subject="x", base=None, start_commit="0" * 40)
    assert gone.start == repo.tip("main")  # a parent's commit that is gone: from the base


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
        make_clone(folder, tmp_path / "w", task_id=1, subject="x", base=base)
    assert not (tmp_path / "w").exists()


def test_a_detached_head_needs_a_named_base(repo: Repo, tmp_path: Path) -> None:
    repo.git("checkout", "--quiet", "--detach")
    with pytest.raises(RepositoryError, match="HEAD is detached"):
        make_clone(repo.path, tmp_path / "w", task_id=1, subject="x", base=None)


def test_settle_takes_the_commits_and_what_was_left_as_the_artifact(repo: Repo, tmp_path: Path) -> None:
    made = make_clone(repo.path, tmp_path / "w", task_id=5, subject="fix", base=None)
    clone = Path(made.path)
    repo.commit({"parser.py": "def parse(x):\n    return int(x)\n"}, "parse numbers", at=clone)
    left = {"test_parser.py": "assert True\n", "parser.py": "def parse(x):\n    return int(x.strip())\n"}
    repo.write(left, at=clone)
    repo.write({"build.log": "ignored\n", ".gitignore": "*.log\n"}, at=clone)
    settled = settle(made, made.start, "left by attempt 1")
    assert settled.problem is None
    changes = settled.changes
    assert changes is not None
    assert changes.dirty
    assert [c.split(" ", 1)[1] for c in changes.commits] == ["parse numbers", "left by attempt 1"]
    assert repo.git("rev-parse", task_ref(5)) == settled.artifact == changes.head
    assert repo.show(settled.artifact, "parser.py") == "def parse(x):\n    return int(x.strip())"
    assert "build.log" not in repo.git("ls-tree", "-r", "--name-only", settled.artifact)
    assert (changes.files, changes.insertions, changes.deletions) == (3, 3, 1)
    assert repo.git("for-each-ref", "refs/vigil/incoming") == ""
    renewed = renew_clone(replace(made, artifact=settled.artifact))  # the next attempt's clone
    again = settle(renewed, settled.artifact, "nothing")
    assert again.changes is not None
    assert (again.changes.commits, again.changes.dirty, again.artifact) == ((), False, settled.artifact)


def test_whatever_branch_the_agent_ended_on_its_head_is_taken(repo: Repo, tmp_path: Path) -> None:
    made = make_clone(repo.path, tmp_path / "w", task_id=6, subject="fix", base=None)
    clone = Path(made.path)
    repo.git("checkout", "--quiet", "-b", "other", cwd=clone)
    repo.commit({"parser.py": "on another branch\n"}, "fix on other", at=clone)
    settled = settle(made, made.start, "left")
    assert settled.problem is None
    assert repo.show(settled.artifact, "parser.py") == "on another branch"


def test_a_head_that_does_not_descend_from_the_base_is_not_taken(repo: Repo, tmp_path: Path) -> None:
    made = make_clone(repo.path, tmp_path / "w", task_id=7, subject="fix", base=None)
    clone = Path(made.path)
    repo.git("checkout", "--quiet", "--orphan", "rootless", cwd=clone)
    repo.commit({"parser.py": "unrelated\n"}, "unrelated history", at=clone)
    settled = settle(made, made.start, "left")
    assert settled.artifact == made.start
    assert settled.problem is not None
    assert "does not descend from main" in settled.problem
    assert repo.git("rev-parse", task_ref(7)) == made.start


def test_head_is_read_as_data_never_through_an_indirection(repo: Repo, tmp_path: Path) -> None:
    made = make_clone(repo.path, tmp_path / "w", task_id=8, subject="fix", base=None)
    git_dir = Path(made.path) / ".git"
    tip = repo.commit({"parser.py": "x\n"}, "mine", at=Path(made.path))
    assert read_head(git_dir) == tip
    (git_dir / "HEAD").write_text("ref: refs/heads/../../../../etc/passwd\n")
    assert read_head(git_dir) is None
    (git_dir / "HEAD").write_text(f"{tip}\n")
    assert read_head(git_dir) == tip
    repo.git("pack-refs", "--all", cwd=Path(made.path))
    (git_dir / "HEAD").write_text(f"ref: refs/heads/{made.branch}\n")
    assert read_head(git_dir) == tip  # a packed ref
    (git_dir / "HEAD").unlink()
    (git_dir / "HEAD").symlink_to(repo.path / ".git" / "HEAD")
    assert read_head(git_dir) is None


def test_settling_runs_nothing_the_agent_planted_and_writes_nothing_of_the_operators(
    repo: Repo, tmp_path: Path
) -> None:
    """What an agent could plant in its clone: hooks, a file-system monitor, a
    filter for every file, a HEAD pointing at the operator's main, a commondir
    into a repository of its own. Taking its work runs none of it, and the
    operator's refs, index, configuration, hooks and info/ stay byte for byte."""
    before = operator_state(repo)
    made = make_clone(repo.path, tmp_path / "w", task_id=9, subject="fix", base=None)
    clone = Path(made.path)
    git_dir = clone / ".git"
    ran = tmp_path / "ran"
    for hook in ("pre-commit", "post-commit", "post-checkout", "reference-transaction"):
        (git_dir / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {ran}-{hook}\n")
        (git_dir / "hooks" / hook).chmod(0o755)
    with (git_dir / "config").open("a") as config:
        config.write(
            f'[core]\n\tfsmonitor = "touch {ran}-fsmonitor; false"\n\thooksPath = {git_dir / "hooks"}\n'
            f'[filter "evil"]\n\tclean = "touch {ran}-clean; cat"\n\tsmudge = "touch {ran}-smudge; cat"\n'
            f'[diff "evil"]\n\ttextconv = "touch {ran}-textconv; cat"\n'
        )
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "attributes").write_text("* filter=evil diff=evil\n")
    (clone / ".gitattributes").write_text("* filter=evil diff=evil\n")
    (git_dir / "commondir").write_text(str(repo.path / ".git") + "\n")
    (clone / "parser.py").write_text("changed\n")
    settled = settle(made, made.start, "left")
    assert settled.changes is not None
    assert settled.changes.dirty
    assert repo.show(settled.artifact, "parser.py") == "changed"
    assert sorted(p.name for p in tmp_path.glob("ran*")) == []
    assert operator_state(repo) == before
    # HEAD pointed at the operator's main, an edit left: still the task's artifact, main untouched
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    (clone / "parser.py").write_text("changed again\n")
    again = settle(replace(made, artifact=settled.artifact), settled.artifact, "left")
    assert repo.show(again.artifact, "parser.py") == "changed again"
    assert operator_state(repo) == before
    assert not list(tmp_path.glob("ran*"))


def test_a_new_attempt_starts_from_a_fresh_clone_at_the_artifact(repo: Repo, tmp_path: Path) -> None:
    made = make_clone(repo.path, tmp_path / "w", task_id=10, subject="fix", base=None)
    clone = Path(made.path)
    repo.commit({"parser.py": "kept\n", ".gitignore": "junk/\n"}, "kept work", at=clone)
    (clone / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 1\n")
    (clone / "junk").mkdir()
    (clone / "junk" / "locked").write_text("x")
    (clone / "junk").chmod(0o500)
    artifact = settle(made, made.start, "left").artifact
    again = renew_clone(replace(made, artifact=artifact))
    assert (clone / "parser.py").read_text() == "kept\n"
    assert not (clone / "junk").exists()
    assert not (clone / ".git" / "hooks" / "pre-commit").exists()
    assert repo.git("rev-parse", "HEAD", cwd=clone) == artifact
    assert again.branch == made.branch
    assert not [p for p in clone.parent.iterdir() if p.name.startswith(".discarded")]


def test_removing_a_clone_keeps_its_ref_unless_told(repo: Repo, tmp_path: Path) -> None:
    made = make_clone(repo.path, tmp_path / "w", task_id=11, subject="fix", base=None)
    repo.write({"scratch.txt": "uncommitted\n"}, at=Path(made.path))
    settle(made, made.start, "left")
    remove_clone(made, delete_ref=False)
    assert not Path(made.path).exists()
    assert git.commit_of(git.Checkout(repo.path), task_ref(11)) is not None
    remove_clone(made, delete_ref=True)
    assert git.commit_of(git.Checkout(repo.path), task_ref(11)) is None
    with pytest.raises(RepositoryError, match="no longer exists"):
        renew_clone(replace(made, artifact="1" * 40))


def test_an_operators_repository_gone_is_a_repository_error(repo: Repo, tmp_path: Path) -> None:
    made = make_clone(repo.path, tmp_path / "w", task_id=12, subject="fix", base=None)
    os.rename(repo.path, tmp_path / "moved")
    with pytest.raises(RepositoryError):
        settle(made, made.start, "left")


def test_a_git_file_pointing_at_the_operators_repository_steers_nothing(repo: Repo, tmp_path: Path) -> None:
    before = operator_state(repo)
    made = make_clone(repo.path, tmp_path / "w", task_id=13, subject="fix", base=None)
    clone = Path(made.path)
    shutil.rmtree(clone / ".git")
    (clone / ".git").write_text(f"gitdir: {repo.path / '.git'}\n")
    (clone / "parser.py").write_text("edited\n")
    settled = settle(made, made.start, "left")
    assert settled.problem is not None
    assert "HEAD names no commit" in settled.problem
    assert repo.show(settled.artifact, "parser.py") == "edited"  # its files, on top of where it started
    assert operator_state(repo) == before


def test_a_retired_clone_is_files_only_so_a_persons_git_status_runs_nothing_of_the_agents(
    repo: Repo, tmp_path: Path
) -> None:
    made = make_clone(repo.path, tmp_path / "w", task_id=14, subject="fix", base=None)
    clone = Path(made.path)
    ran = tmp_path / "ran-fsmonitor"
    repo.git("config", "core.fsmonitor", f"touch {ran}; false", cwd=clone)
    (clone / "parser.py").write_text("edited\n")
    settle(made, made.start, "left")
    retire(made)
    assert (clone / "parser.py").read_text() == "edited\n"  # left to look at
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    status = subprocess.run(["git", "status"], cwd=clone, env=env, capture_output=True, text=True, check=False)
    assert "not a git repository" in status.stderr
    assert not ran.exists()


def test_names_another_home_took_on_the_same_repository_get_a_suffix(repo: Repo, tmp_path: Path) -> None:
    first = make_clone(repo.path, tmp_path / "a" / "4", task_id=4, subject="same", base=None)
    settle(first, first.start, "left")  # its change is kept on refs/vigil/tasks/4
    repo.git("branch", "vigil/4-same")
    other = make_clone(repo.path, tmp_path / "b" / "4", task_id=4, subject="same", base=None)
    assert (other.branch, other.ref) == ("vigil/4-same-2", "refs/vigil/tasks/4-2")
