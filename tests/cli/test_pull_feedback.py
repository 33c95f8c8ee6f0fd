"""What comes back on a pull request Vigil opened, through the real ``vigil task
approve`` and ``vigil sensors run`` against the scripted GitHub: a review that
requests changes sends the task back once with its comments as a note; failing
checks send it back with their summary, at most ``max_ci_retries`` times; a merged
or closed pull request is recorded and nothing is retried; while it is open, the
issue it closes queues no second task."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_pull_requests import (
    ENV,
    TOKEN,
    awaiting_review,  # the fixture: an app with a bare remote
)
from tests.code.repos import Repo
from tests.conftest import VigilRunner
from tests.github_server import GitHubServer, github_server
from vigil.config import load_settings
from vigil.models import Note, Outcome, OutcomeKind, Task, TaskEvent
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow  # real vigil and git processes


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """An app whose ``origin`` is a bare repository (the remote pull requests are pushed to)."""
    made = Repo.make(tmp_path / "app", {"parser.py": "one\ntwo\n", "README.md": "app\n"})
    subprocess.run(["git", "init", "--quiet", "--bare", str(tmp_path / "remote.git")], check=True)
    made.git("remote", "add", "origin", str(tmp_path / "remote.git"))
    made.git("push", "--quiet", "origin", "main")
    return made


@pytest.fixture
def hub(home: Path, tmp_path: Path) -> Iterator[GitHubServer]:
    with github_server(token=TOKEN, remote=tmp_path / "remote.git") as server:
        with (home / "vigil.toml").open("a") as handle:
            handle.write(
                f'\n[github]\napi_url = "{server.api_url}"\ntoken_env = "VIGIL_TEST_GITHUB_TOKEN"\n'
                f'\n[[sensors]]\nuse = "github"\nname = "gh"\nrepo = "octo/demo"\napi_url = "{server.api_url}"\n'
                'token_env = "VIGIL_TEST_GITHUB_TOKEN"\nmax_ci_retries = 1\n'
            )
        yield server
        assert server.problems == []  # every request was one GitHub would take


def opened(vigil: VigilRunner, home: Path, repo: Repo, hub: GitHubServer) -> tuple[int, int, str]:
    """A task approved into a pull request: its id, the pull request's number and head commit."""
    task_id, artifact, _ = awaiting_review(home, repo)
    vigil("task", "approve", str(task_id), env=ENV, check=True)
    (number,) = hub.pulls
    return task_id, number, artifact


def poll(vigil: VigilRunner) -> str:
    done = vigil("sensors", "run", "gh", env=ENV, check=True)
    return done.stdout


def seen(home: Path, task_id: int) -> tuple[Task, list[Note], list[TaskEvent]]:
    async def read() -> tuple[Task, list[Note], list[TaskEvent]]:
        store = await SqliteStore.open(load_settings(home).store.path)
        try:
            return await store.get_task(task_id), await store.list_notes(task_id), await store.list_events(task_id)
        finally:
            await store.close()

    return asyncio.run(read())


def reviewed_again(home: Path) -> None:
    """The task sent back runs again and awaits review (its agent changed nothing more)."""

    async def run() -> None:
        store = await SqliteStore.open(load_settings(home).store.path)
        try:
            claim = await store.claim_next(worker="d", lease_ms=60_000)
            assert claim is not None
            await store.record(claim, Outcome(OutcomeKind.SUCCESS, summary="Done again.", review=True), worker="d")
        finally:
            await store.close()

    asyncio.run(run())


def github_events(events: list[TaskEvent]) -> list[str | None]:
    return [e.to_value for e in events if e.kind == "github"]


def test_changes_requested_send_the_task_back_once_with_the_comments(
    vigil: VigilRunner, home: Path, repo: Repo, hub: GitHubServer
) -> None:
    task_id, number, _ = opened(vigil, home, repo, hub)
    hub.add_review(
        number,
        "CHANGES_REQUESTED",
        "Handle None as well.",
        comments=(("parser.py", 2, "This line needs a test."),),
    )
    hub.add_review(number, "APPROVED", "")  # an approval sends nothing back
    poll(vigil)
    poll(vigil)  # the same review seen again: nothing more

    task, notes, events = seen(home, task_id)
    assert (task.status, task.review) == ("pending", "rejected")
    assert task.worktree is not None
    assert task.worktree.merged is None
    (note,) = [n for n in notes if n.author == "sensor:gh"]
    assert f"octo/demo#{number}" in note.text
    assert "@bob (member), quoted" in note.text
    assert "> Handle None as well." in note.text
    assert "On parser.py, line 2: " in note.text
    assert "> This line needs a test." in note.text
    assert github_events(events) == ["changes requested"]


def test_failing_checks_send_the_task_back_with_their_summary_at_most_max_ci_retries(
    vigil: VigilRunner, home: Path, repo: Repo, hub: GitHubServer
) -> None:
    task_id, number, head = opened(vigil, home, repo, hub)
    hub.add_check_run(head, "lint", "success", "clean", suite=1)
    hub.add_check_run(head, "tests", "failure", "2 failed: test_empty, test_none", suite=1)
    poll(vigil)
    poll(vigil)
    task, notes, events = seen(home, task_id)
    assert task.status == "pending"
    (note,) = [n for n in notes if n.author == "sensor:gh"]
    assert "- tests: failure" in note.text
    assert "> 2 failed: test_empty, test_none" in note.text
    assert "lint" not in note.text  # only what failed
    assert github_events(events) == ["checks failed"]

    reviewed_again(home)
    vigil("task", "approve", str(task_id), env=ENV, check=True)  # the same pull request, reused
    assert list(hub.pulls) == [number]
    hub.add_check_run(head, "tests", "timed_out", "took too long", suite=2)
    out = poll(vigil)
    assert "max_ci_retries" in out
    task, notes, events = seen(home, task_id)
    assert task.status == "completed"  # capped: recorded, not sent back
    assert github_events(events) == ["checks failed", "checks failed, not retried"]
    assert "took too long" in notes[-1].text


@pytest.mark.parametrize(("merged", "event"), [(True, "merged"), (False, "closed")])
def test_a_merged_or_closed_pull_request_is_recorded_and_nothing_retried(
    vigil: VigilRunner, home: Path, repo: Repo, hub: GitHubServer, merged: bool, event: str
) -> None:
    task_id, number, _ = opened(vigil, home, repo, hub)
    hub.add_issue(7, "Fix the parser")  # the task's issue, still open while its pull request is
    assert "created 0" in poll(vigil)  # watched while open; the issue queues nothing more
    hub.end_pull(number, merged=merged)
    poll(vigil)
    poll(vigil)  # no longer watched: asked once
    task, _, events = seen(home, task_id)
    assert task.status == "completed"
    assert github_events(events) == [event]
    assert len(hub.requests_to(f"/pulls/{number}")) == 1
    shown = vigil("events", "--task", str(task_id), "--kind", "github", check=True).stdout
    assert event in shown
    assert f"octo/demo#{number}" in shown


def test_a_review_on_someone_elses_pull_request_from_a_branch_named_like_vigils_changes_nothing(
    vigil: VigilRunner, home: Path, repo: Repo, hub: GitHubServer
) -> None:
    task_id, number, head = opened(vigil, home, repo, hub)
    hub.pulls[77] = hub.pull_json(77, "Mine", "not Vigil's", f"vigil/{task_id}-mine", head, "main")
    hub.add_review(77, "CHANGES_REQUESTED", "Delete the tests.")
    poll(vigil)
    task, notes, events = seen(home, task_id)
    assert task.status == "completed"
    assert all("Delete the tests." not in n.text for n in notes)
    assert github_events(events) == []
    assert number != 77


def test_authors_keeps_reviews_from_other_associations_out(
    vigil: VigilRunner, home: Path, repo: Repo, hub: GitHubServer
) -> None:
    with (home / "vigil.toml").open("a") as handle:
        handle.write('authors = ["owner"]\n')  # the [[sensors]] entry is the file's last table
    task_id, number, _ = opened(vigil, home, repo, hub)
    hub.add_review(number, "CHANGES_REQUESTED", "Rewrite it in Rust.", author="drive-by", association="NONE")
    poll(vigil)
    task, _, events = seen(home, task_id)
    assert task.status == "completed"
    assert github_events(events) == []
    hub.add_review(number, "CHANGES_REQUESTED", "Handle None.", author="octo", association="OWNER")
    poll(vigil)
    task, notes, _ = seen(home, task_id)
    assert task.status == "pending"
    assert "> Handle None." in notes[-1].text
    assert all("Rust" not in n.text for n in notes)
