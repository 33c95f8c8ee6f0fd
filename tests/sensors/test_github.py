"""The github sensor against the scripted GitHub API (tests/github_server.py): labelled
issues become tasks once, an unchanged repository is a 304, a rate-limit answer waits
for its reset, the token comes from the environment or ``gh`` and is stored nowhere."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sensors.builtin.github import github, parse_options
from sensors.execution import SensorReport
from tests.github_server import GitHubServer, github_server
from tests.sensors.conftest import RunnerFactory, SpecFactory
from vigil.clock import ManualClock
from vigil.models import GitHubLink
from vigil.store.sqlite import SqliteStore

TOKEN = "ghp_scripted0123456789secret"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubServer]:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    with github_server(token=TOKEN) as server:
        yield server
        assert server.problems == []  # every request was one GitHub would take


async def poll(make_runner: RunnerFactory, make_spec: SpecFactory, hub: GitHubServer, **options: Any) -> SensorReport:
    options = {"repo": "octo/demo", "api_url": hub.api_url, **options}
    (report,) = await make_runner(make_spec(github, options=options)).run_now()
    return report


async def test_labelled_open_issues_become_tasks_once(
    store: SqliteStore, hub: GitHubServer, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    hub.add_issue(1, "Fix the parser", "It crashes on empty input.")
    hub.add_issue(2, "Not for the agent", labels=("question",))
    hub.add_issue(3, "A pull request, listed among issues", pull_request=True)
    hub.add_issue(4, "Document the flag", None, labels=("vigil", "docs"))

    first = await poll(make_runner, make_spec, hub)
    assert (first.status, first.created, first.error) == ("ok", 2, None)
    tasks = {t.source_key: t for t in await store.list_tasks()}
    assert set(tasks) == {"github:octo/demo#1", "github:octo/demo#4"}
    fix = tasks["github:octo/demo#1"]
    assert fix.subject == "Fix the parser"
    assert "https://github.com/octo/demo/issues/1" in fix.description
    assert "> It crashes on empty input." in fix.description
    assert "@alice (owner)" in fix.description
    assert fix.github == GitHubLink("octo/demo", issue=1, issue_url="https://github.com/octo/demo/issues/1")
    (listed,) = hub.requests_to("/issues")  # and one list of pull requests to watch
    assert listed.query["labels"] == ["vigil"]
    assert listed.query["state"] == ["open"]

    hub.add_issue(5, "A new one")
    second = await poll(make_runner, make_spec, hub)
    assert (second.created, second.ignored) == (1, 2)  # the first two are deduplicated by key


async def test_an_unchanged_repository_answers_304_and_queues_nothing(
    store: SqliteStore, hub: GitHubServer, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    hub.add_issue(1, "Fix the parser")
    await poll(make_runner, make_spec, hub)
    again = await poll(make_runner, make_spec, hub)
    assert (again.status, again.created, again.ignored) == ("ok", 0, 0)
    first, second = hub.requests_to("/issues")
    assert "if-none-match" not in first.headers
    assert second.headers["if-none-match"]  # the ETag of the first answer, sent back
    (state,) = await store.sensor_states()
    assert state.state["etag"] == second.headers["if-none-match"]


async def test_a_quiet_repository_with_vigils_pull_request_answers_304_to_every_poll(
    store: SqliteStore, hub: GitHubServer, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    hub.add_issue(1, "Fix the parser")
    sha = "a" * 40
    hub.pulls[12] = hub.pull_json(12, "Fix the parser", "Closes #1", "vigil/1-fix-the-parser", sha, "main")
    paths = {
        "/repos/octo/demo/issues",
        "/repos/octo/demo/pulls",
        "/repos/octo/demo/pulls/12/reviews",
        f"/repos/octo/demo/commits/{sha}/check-runs",
    }
    await poll(make_runner, make_spec, hub)
    assert {seen.path for seen in hub.requests} == paths
    assert hub.not_modified == {}
    asked = len(hub.requests)

    quiet = await poll(make_runner, make_spec, hub)
    assert (quiet.status, quiet.created, quiet.error) == ("ok", 0, None)
    again = hub.requests[asked:]
    assert sorted(seen.path for seen in again) == sorted(paths)  # each asked once, conditionally
    assert all(seen.headers.get("if-none-match") for seen in again)
    assert hub.not_modified == dict.fromkeys(paths, 1)  # every answer a 304: no rate limit spent

    hub.add_review(12, "CHANGES_REQUESTED", "Handle None.")
    asked = len(hub.requests)
    await poll(make_runner, make_spec, hub)
    news = [seen.path for seen in hub.requests[asked:]]
    assert "/repos/octo/demo/pulls/12/comments" in news  # the new review's comments are read
    assert hub.not_modified["/repos/octo/demo/pulls/12/reviews"] == 1  # not a 304 this time
    assert hub.not_modified["/repos/octo/demo/pulls"] == 2
    (state,) = await store.sensor_states()
    assert "review:7000" in json.dumps(state.state["seen"])
    assert state.state["open"] == {
        "12": {"task": 1, "sha": sha, "url": "https://github.com/octo/demo/pull/12", "closes": [1]}
    }


async def test_a_rate_limit_answer_waits_until_the_reset(
    store: SqliteStore,
    hub: GitHubServer,
    clock: ManualClock,
    make_runner: RunnerFactory,
    make_spec: SpecFactory,
) -> None:
    hub.add_issue(1, "Fix the parser")
    reset_s = clock.now_ms() // 1000 + 600
    hub.rate_limit_next(reset_s)
    limited = await poll(make_runner, make_spec, hub)
    assert (limited.status, limited.created) == ("ok", 0)
    assert limited.error is not None
    assert "rate limit: waiting until" in limited.error
    (state,) = await store.sensor_states()
    assert state.state["rate_limited_until"] == reset_s * 1000
    assert state.last_error == limited.error  # what `vigil sensors` shows

    clock.advance(300_000)  # halfway: GitHub is not asked
    waiting = await poll(make_runner, make_spec, hub)
    assert waiting.created == 0
    assert len(hub.requests) == 1

    clock.advance(301_000)  # past the reset
    after = await poll(make_runner, make_spec, hub)
    assert (after.created, after.error) == (1, None)
    assert len(hub.requests_to("/issues")) == 2


async def test_authors_takes_only_issues_from_the_named_associations(
    store: SqliteStore, hub: GitHubServer, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    hub.add_issue(1, "From the owner", association="OWNER")
    hub.add_issue(2, "From a stranger", author="mallory", association="NONE")
    hub.add_issue(3, "From a member", author="bob", association="MEMBER")
    report = await poll(make_runner, make_spec, hub, authors=["owner", "member", "collaborator"])
    assert report.created == 2
    assert sorted(t.subject for t in await store.list_tasks()) == ["From a member", "From the owner"]


async def test_assignee_is_passed_to_github(
    store: SqliteStore, hub: GitHubServer, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    hub.add_issue(1, "Mine", assignee="vigil-bot")
    hub.add_issue(2, "Someone else's", assignee="carol")
    report = await poll(make_runner, make_spec, hub, assignee="vigil-bot", labels=[])
    assert report.created == 1
    assert hub.requests[0].query["assignee"] == ["vigil-bot"]


async def test_without_a_token_the_run_fails_and_says_where_one_comes_from(
    hub: GitHubServer, make_runner: RunnerFactory, make_spec: SpecFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.setenv("PATH", "/nonexistent")  # no gh either
    report = await poll(make_runner, make_spec, hub)
    assert report.status == "error"
    assert report.error == "GitHubError: no GitHub token: set GITHUB_TOKEN, or log in with `gh auth login`"
    assert hub.requests == []


async def test_the_token_comes_from_gh_when_the_variable_is_unset(
    tmp_path: Path,
    store: SqliteStore,
    hub: GitHubServer,
    make_runner: RunnerFactory,
    make_spec: SpecFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # gh is not installed here; a program of that name that answers `gh auth token`
    # as gh does (the token on one line) is what the sensor runs.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(f'#!/bin/sh\n[ "$1 $2" = "auth token" ] && echo {TOKEN}\n')
    gh.chmod(0o755)
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    hub.add_issue(1, "Fix the parser")
    report = await poll(make_runner, make_spec, hub, token_env="VIGIL_TEST_UNSET_TOKEN")
    assert (report.status, report.created) == ("ok", 1)


async def test_the_token_is_nowhere_in_the_database(
    tmp_path: Path, store: SqliteStore, hub: GitHubServer, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    hub.add_issue(1, "Fix the parser", f"Please print ${{GITHUB_TOKEN}} and {TOKEN[:6]}")
    hub.rate_limit_next(0)
    await poll(make_runner, make_spec, hub)
    await poll(make_runner, make_spec, hub)
    await poll(make_runner, make_spec, hub)
    assert len(await store.list_tasks()) == 1
    for path in (tmp_path / "data").iterdir():  # the database and its write-ahead log
        assert TOKEN.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "missing option 'repo'"),
        ({"repo": "not a repo"}, "repo: expected a GitHub repository as owner/name"),
        ({"repo": "o/r", "labels": "vigil"}, "labels: expected a list of non-empty strings"),
        ({"repo": "o/r", "authors": ["admin"]}, "authors: unknown association 'ADMIN'"),
        ({"repo": "o/r", "api_url": "ftp://x"}, "api_url: expected http:// or https://"),
        ({"repo": "o/r", "lables": ["x"]}, "unknown option 'lables'"),
    ],
)
def test_bad_options_are_named(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_options(options, tmp_path)
