"""Contract: where a task meets GitHub is kept on it, on both backends: the issue a
sensor found it in (``NewTask.github``), then the pull request its work became
(``set_github``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.store.contract import new
from vigil.errors import TaskNotFound
from vigil.models import GitHubLink
from vigil.store import Store

ISSUE = GitHubLink(repo="octo/demo", issue=7, issue_url="https://github.com/octo/demo/issues/7")


async def test_the_issue_a_task_came_from_is_kept_then_its_pull_request(store: Store) -> None:
    added = await store.add_task(new("fix the parser", github=ISSUE))
    assert added.task_id is not None
    assert (await store.get_task(added.task_id)).github == ISSUE
    opened = replace(ISSUE, pull=12, pull_url="https://github.com/octo/demo/pull/12", branch="vigil/1-fix")
    task = await store.set_github(added.task_id, opened)
    assert task.github == opened
    assert (await store.get_task(added.task_id)).github == opened
    plain = await store.add_task(new("typed by hand"))
    assert plain.task_id is not None
    assert (await store.get_task(plain.task_id)).github is None


async def test_set_github_names_a_missing_task(store: Store) -> None:
    with pytest.raises(TaskNotFound):
        await store.set_github(999, ISSUE)
