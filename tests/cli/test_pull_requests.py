"""``merge = "pull_request"`` through the real ``vigil task approve``: exactly the
reviewed commit is pushed to the task's branch on the remote (a real bare
repository) and a pull request that closes the task's issue is opened on the
scripted GitHub; a failed approval records nothing and approving again finishes it
once; an open pull request from the branch is reused; a refused push is a clear
error."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.code.repos import Repo, worked_clone
from tests.conftest import VigilRunner
from tests.github_server import GitHubServer, github_server
from vigil.codework import CheckResult
from vigil.config import load_settings
from vigil.home import scratch_path
from vigil.models import GitHubLink, NewTask, Outcome, OutcomeKind
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow  # real vigil and git processes

TOKEN = "ghp_pulls0123456789secret"
ENV = {"VIGIL_TEST_GITHUB_TOKEN": TOKEN}
ISSUE = GitHubLink("octo/demo", issue=7, issue_url="https://github.com/octo/demo/issues/7")


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    made = Repo.make(tmp_path / "app", {"parser.py": "one\ntwo\n", "README.md": "app\n"})
    subprocess.run(["git", "init", "--quiet", "--bare", str(tmp_path / "remote.git")], check=True)
    made.git("remote", "add", "origin", str(tmp_path / "remote.git"))
    made.git("push", "--quiet", "origin", "main")
    return made


@pytest.fixture
def hub(home: Path, tmp_path: Path) -> Iterator[GitHubServer]:
    with github_server(token=TOKEN, remote=tmp_path / "remote.git") as server:
        with (home / "vigil.toml").open("a") as handle:
            handle.write(f'\n[github]\napi_url = "{server.api_url}"\ntoken_env = "VIGIL_TEST_GITHUB_TOKEN"\n')
        yield server


def awaiting_review(home: Path, repo: Repo) -> tuple[int, str, str]:
    """A task from issue #7 whose 'agent' changed parser.py, awaiting review with
    ``merge = "pull_request"``; its id, change and branch."""

    async def setup() -> tuple[int, str, str]:
        store = await SqliteStore.open(load_settings(home).store.path)
        try:
            added = await store.add_task(NewTask("Fix the parser", github=ISSUE))
            assert added.task_id is not None
            made = worked_clone(
                repo, scratch_path(home, added.task_id), {"parser.py": "one\n2\n"}, task_id=added.task_id
            )
            await store.set_worktree(added.task_id, replace(made, merge="pull_request"))
            claim = await store.claim_next(worker="d", lease_ms=60_000)
            assert claim is not None
            outcome = Outcome(
                OutcomeKind.SUCCESS,
                summary="The parser no longer crashes on empty input.",
                review=True,
                checks=(CheckResult(("pytest", "-q"), 0, "3 passed"),),
            )
            await store.record(claim, outcome, worker="d")
            assert made.artifact is not None
            return added.task_id, made.artifact, made.branch
        finally:
            await store.close()

    return asyncio.run(setup())


def remote_tip(tmp_path: Path, branch: str) -> str | None:
    done = subprocess.run(
        ["git", "--git-dir", str(tmp_path / "remote.git"), "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None


def test_approval_pushes_the_reviewed_commit_and_opens_a_pull_request_that_closes_the_issue(
    vigil: VigilRunner, home: Path, repo: Repo, hub: GitHubServer, tmp_path: Path
) -> None:
    task_id, artifact, branch = awaiting_review(home, repo)
    main_before = repo.tip("main")
    done = vigil("task", "approve", str(task_id), "--commit", artifact[:12], env=ENV, check=True)
    (number,) = hub.pulls
    url = f"https://github.com/octo/demo/pull/{number}"
    assert done.stdout.strip() == f"task #{task_id} approved; completed; pull request {url} (opened)"
    assert remote_tip(tmp_path, branch) == artifact  # exactly the reviewed commit
    assert repo.tip("main") == main_before  # nothing merged locally
    pull = hub.pulls[number]
    assert (pull["title"], pull["head"]["ref"], pull["base"]["ref"]) == ("Fix the parser", branch, "main")
    assert pull["body"].startswith("The parser no longer crashes on empty input.")
    assert "Checks that passed:\n- `pytest -q`" in pull["body"]
    assert "Closes #7" in pull["body"]

    task = json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)
    assert task["status"] == "completed"
    assert task["github"] == {
        "repo": "octo/demo",
        "issue": 7,
        "issue_url": ISSUE.issue_url,
        "pull": number,
        "pull_url": url,
        "branch": branch,
    }
    assert f"octo/demo#{number} {url} (branch {branch})" in vigil("task", "show", str(task_id), check=True).stdout
    assert hub.problems == []
    for path in home.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_a_failed_approval_records_nothing_and_the_next_one_finishes_it_once(
    vigil: VigilRunner, home: Path, repo: Repo, hub: GitHubServer, tmp_path: Path
) -> None:
    task_id, artifact, branch = awaiting_review(home, repo)
    refused = vigil("task", "approve", str(task_id), env={"VIGIL_TEST_GITHUB_TOKEN": "ghp_wrong"})
    assert refused.returncode == 1
    assert refused.stderr.startswith("vigil: error: GitHub refused the pull request")
    assert "HTTP 401" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert remote_tip(tmp_path, branch) == artifact  # the push went through; the rest did not
    shown = json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)
    assert (shown["status"], shown["review"], shown["github"]) == ("blocked", "pending", json.loads(ISSUE.to_json()))

    hub.problems.clear()  # the refused token was the point
    again = vigil("task", "approve", str(task_id), env=ENV, check=True)
    assert "(opened)" in again.stdout
    assert len(hub.pulls) == 1


def test_an_open_pull_request_from_the_branch_is_reused(
    vigil: VigilRunner, home: Path, repo: Repo, hub: GitHubServer, tmp_path: Path
) -> None:
    task_id, artifact, branch = awaiting_review(home, repo)
    repo.git("push", "--quiet", "origin", f"{artifact}:refs/heads/{branch}")
    hub.pulls[55] = hub.pull_json(55, "Fix the parser", "by hand", branch, artifact, "main")
    done = vigil("task", "approve", str(task_id), env=ENV, check=True)
    assert done.stdout.strip().endswith("pull request https://github.com/octo/demo/pull/55 (already open, reused)")
    assert list(hub.pulls) == [55]
    assert hub.problems == []


def test_a_push_the_remote_refuses_is_an_error_and_nothing_is_opened(
    vigil: VigilRunner, home: Path, repo: Repo, hub: GitHubServer, tmp_path: Path
) -> None:
    task_id, _, branch = awaiting_review(home, repo)
    other = repo.commit({"README.md": "someone else's\n"}, "elsewhere")
    repo.git("push", "--quiet", "origin", f"{other}:refs/heads/{branch}")
    refused = vigil("task", "approve", str(task_id), env=ENV)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"vigil: error: git push to origin refused branch {branch}")
    assert remote_tip(tmp_path, branch) == other
    assert hub.pulls == {}
    assert hub.requests == []
    shown = json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)
    assert shown["review"] == "pending"


def test_task_open_prints_the_pull_request_else_the_issue(
    vigil: VigilRunner, home: Path, repo: Repo, hub: GitHubServer
) -> None:
    task_id, _, _ = awaiting_review(home, repo)
    assert vigil("task", "open", str(task_id), check=True).stdout.strip() == ISSUE.issue_url
    vigil("task", "approve", str(task_id), env=ENV, check=True)
    (number,) = hub.pulls
    assert (
        vigil("task", "open", str(task_id), check=True).stdout.strip() == f"https://github.com/octo/demo/pull/{number}"
    )
    plain = vigil("task", "add", "typed by hand", check=True)
    assert plain.returncode == 0
    missing = vigil("task", "open", "2")
    assert (missing.returncode, missing.stderr.strip()) == (
        1,
        "vigil: error: task #2 has no pull request or GitHub issue",
    )


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[github]\napi_url = "ftp://example.com"\n', "[github] api_url: expected an http:// or https:// URL"),
        ('[github]\nremote = ""\n', "[github] remote: expected"),
        ('[github]\nrepo = "octo/demo"\n', "[github] unknown key 'repo'"),
    ],
)
def test_a_bad_github_section_is_named(vigil_in_process: VigilRunner, home: Path, toml: str, message: str) -> None:
    (home / "vigil.toml").write_text((home / "vigil.toml").read_text() + "\n" + toml)
    proc = vigil_in_process("task", "list")
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
