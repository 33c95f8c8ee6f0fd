"""A task with ``merge = "pull_request"`` and no review becomes a pull request when
its run succeeds: the loop with a ``FakeExecutor`` standing in for the agent, a
real repository with a bare remote, and the scripted GitHub (tests/github_server.py).
The push and the pull request are the approval's own idempotent step; when git or
GitHub refuses, nothing is recorded and the task waits for a person, whose
approval finishes it once; a task sent back by its pull request's review pushes
its next success to the same branch and reuses the pull request."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.executors import RunContext
from tests.code.repos import Repo
from tests.dispatch.conftest import MakeDispatcher
from tests.github_server import GitHubServer, github_server
from vigil.codework import Check, CodeOptions
from vigil.config import GitHubSettings, Settings
from vigil.models import GitHubLink, NewTask, Outcome, OutcomeKind, SensorRun, Task, TaskFeedback, TaskStatus
from vigil.review import approve
from vigil.store.sqlite import SqliteStore

TOKEN = "ghp_onsuccess0123456789secret"
TOKEN_ENV = "VIGIL_TEST_GITHUB_TOKEN"
ISSUE = GitHubLink("octo/demo", issue=7, issue_url="https://github.com/octo/demo/issues/7")


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    made = Repo.make(tmp_path / "app", {"answer.txt": "0\n", "README.md": "app\n"})
    subprocess.run(["git", "init", "--quiet", "--bare", str(tmp_path / "remote.git")], check=True)
    made.git("remote", "add", "origin", str(tmp_path / "remote.git"))
    made.git("push", "--quiet", "origin", "main")
    return made


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubServer]:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with github_server(token=TOKEN, remote=tmp_path / "remote.git") as server:
        yield server


def on_repo(settings: Settings, repo: Repo, hub: GitHubServer, **code: object) -> Settings:
    """Every task on ``repo``, merged as a pull request on the scripted GitHub, unreviewed."""
    options = CodeOptions(repo=str(repo.path), merge="pull_request", **code)  # type: ignore[arg-type]
    return replace(
        settings,
        dispatch=replace(settings.dispatch, executor="command", code=options),
        github=GitHubSettings(api_url=hub.api_url, token_env=TOKEN_ENV),
    )


def answers(*values: str) -> object:
    """An agent that writes the next of ``values`` into answer.txt and commits it."""
    left = iter(values)

    def handler(task: Task, ctx: RunContext) -> Outcome:
        assert ctx.workdir is not None
        value = next(left)
        work = Repo(ctx.workdir)
        work.write({"answer.txt": value + "\n"})
        work.git("commit", "--quiet", "--all", "-m", f"answer {value}")
        return Outcome(OutcomeKind.SUCCESS, summary=f"The answer is {value}.")

    return handler


def remote_tip(tmp_path: Path, branch: str) -> str | None:
    done = subprocess.run(
        ["git", "--git-dir", str(tmp_path / "remote.git"), "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None


async def test_a_success_without_review_is_pushed_and_opens_a_pull_request_that_closes_the_issue(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo, hub: GitHubServer, tmp_path: Path
) -> None:
    await db.add_task(NewTask("Answer the question", github=ISSUE))
    dispatcher, fake = make_dispatcher(answers("42"), settings=on_repo(settings, repo, hub))
    main_before = repo.tip("main")
    task = await dispatcher.run_once()
    assert task is not None
    assert task.status is TaskStatus.COMPLETED
    ((_, ctx),) = fake.calls
    assert "opens a pull request with your result" in ctx.prompt
    assert "close the task yourself" not in ctx.prompt  # Vigil decides when it is done
    (number,) = hub.pulls
    pull = hub.pulls[number]
    worktree = task.worktree
    assert worktree is not None
    assert worktree.artifact is not None
    assert (pull["head"]["ref"], pull["base"]["ref"], pull["title"]) == (worktree.branch, "main", "Answer the question")
    assert pull["body"].startswith("The answer is 42.")
    assert "Closes #7" in pull["body"]
    assert remote_tip(tmp_path, worktree.branch) == worktree.artifact  # exactly the run's result
    assert repo.tip("main") == main_before  # nothing merged locally
    assert task.github == replace(
        ISSUE, pull=number, pull_url=f"https://github.com/octo/demo/pull/{number}", branch=worktree.branch
    )
    assert (worktree.merge, worktree.merged) == ("pull_request", worktree.artifact)
    assert hub.problems == []


async def test_a_refused_pull_request_records_nothing_and_waits_for_a_person_whose_approval_finishes_it_once(
    db: SqliteStore,
    make_dispatcher: MakeDispatcher,
    settings: Settings,
    repo: Repo,
    hub: GitHubServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    added = await db.add_task(NewTask("Answer the question", github=ISSUE))
    assert added.task_id is not None
    configured = on_repo(settings, repo, hub)
    dispatcher, _ = make_dispatcher(answers("42"), settings=configured)
    monkeypatch.setenv(TOKEN_ENV, "ghp_revoked")  # GitHub answers 401 once the push went through
    task = await dispatcher.run_once()
    assert task is not None
    assert task.awaiting_review
    assert task.github == ISSUE  # no pull request recorded
    assert task.worktree is not None
    assert task.worktree.merged is None
    (run,) = await db.list_runs(task.id)
    assert run.outcome == "success"
    assert run.error is not None
    assert run.error.startswith("pull request not opened: GitHub refused the pull request")
    (note,) = await db.list_notes(task.id)
    assert note.author == "dispatcher"
    assert f"`vigil task approve {task.id}` tries again" in note.text
    assert hub.pulls == {}
    assert hub.problems == ["a request without the expected token"]
    hub.problems.clear()

    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    approval = await approve(db, added.task_id, actor="human", github=configured.github)
    assert approval.published is not None
    assert approval.published.opened
    (number,) = hub.pulls
    assert approval.task.status is TaskStatus.COMPLETED
    assert approval.task.github is not None
    assert approval.task.github.pull == number
    assert remote_tip(tmp_path, task.worktree.branch) == task.worktree.artifact
    assert hub.problems == []


async def test_a_send_back_pushes_the_next_success_to_the_same_branch_and_reuses_the_pull_request(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo, hub: GitHubServer, tmp_path: Path
) -> None:
    added = await db.add_task(NewTask("Answer the question", github=ISSUE))
    assert added.task_id is not None
    check = Check(("true",))
    dispatcher, fake = make_dispatcher(answers("41", "42"), settings=on_repo(settings, repo, hub, checks=(check,)))
    first = await dispatcher.run_once()
    assert first is not None
    assert first.status is TaskStatus.COMPLETED
    (number,) = hub.pulls
    assert first.worktree is not None
    branch, first_push = first.worktree.branch, remote_tip(tmp_path, first.worktree.branch)
    assert "Checks that passed:\n- `true`" in hub.pulls[number]["body"]

    review = TaskFeedback(added.task_id, "octo/demo", number, "changes requested", "Say 42.", send_back=True)
    await db.record_sensor_run("github", SensorRun(started_at=1, duration_ms=1, status="ok"), [], None, [review])
    second = await dispatcher.run_once()
    assert second is not None
    assert second.status is TaskStatus.COMPLETED
    assert list(hub.pulls) == [number]  # the same pull request, reused
    assert second.github is not None
    assert second.github.pull == number
    assert second.worktree is not None
    second_push = remote_tip(tmp_path, branch)
    assert second_push == second.worktree.artifact != first_push
    assert first_push is not None
    repo.git("merge-base", "--is-ancestor", first_push, str(second_push))  # a fast-forward
    assert repo.show(str(second_push), "answer.txt") == "42"
    assert hub.problems == []
    assert "Say 42." in fake.calls[1][1].prompt  # the note, for an agent that cannot resume


async def test_a_refused_push_records_nothing_and_the_task_waits_for_a_person(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo, hub: GitHubServer, tmp_path: Path
) -> None:
    # someone else's commit already on the task's branch: the push is not a fast-forward
    other = repo.commit({"README.md": "someone else\n"}, "someone else's work")
    repo.git("push", "--quiet", "origin", f"{other}:refs/heads/vigil/1-answer-the-question")
    repo.git("reset", "--quiet", "--hard", "HEAD~1")
    await db.add_task(NewTask("Answer the question", github=ISSUE))
    dispatcher, _ = make_dispatcher(answers("42"), settings=on_repo(settings, repo, hub))
    task = await dispatcher.run_once()
    assert task is not None
    assert task.awaiting_review
    assert task.github == ISSUE
    (note,) = await db.list_notes(task.id)
    refused = "pull request not opened: git push to origin refused branch vigil/1-answer-the-question"
    assert note.text.startswith(refused)
    assert remote_tip(tmp_path, "vigil/1-answer-the-question") == other  # never forced
    assert hub.pulls == {}
    assert hub.requests == []  # GitHub is not asked once the push failed
