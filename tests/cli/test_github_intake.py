"""The github sensor through the real ``vigil``: `vigil sensors run` queues a labelled
issue, `task show` (text and ``--json``) names the issue, `vigil sensors` says when
a rate-limited sensor will ask again, and the token is in no file of the home."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from tests.github_server import GitHubServer, github_server

pytestmark = pytest.mark.slow  # real vigil processes

TOKEN = "ghp_intake0123456789secret"


@pytest.fixture
def hub(home: Path) -> Iterator[GitHubServer]:
    with github_server(token=TOKEN) as server:
        with (home / "vigil.toml").open("a") as handle:
            handle.write(
                f'\n[[sensors]]\nuse = "github"\nrepo = "octo/demo"\napi_url = "{server.api_url}"\n'
                'token_env = "VIGIL_TEST_GITHUB_TOKEN"\n'
            )
        yield server
        assert server.problems == []


def test_a_labelled_issue_becomes_a_task_that_names_it(home: Path, vigil: VigilRunner, hub: GitHubServer) -> None:
    hub.add_issue(7, "Fix the parser", "It crashes on empty input.")
    env = {"VIGIL_TEST_GITHUB_TOKEN": TOKEN}
    run = vigil("sensors", "run", "github", env=env, check=True)
    assert run.stdout.strip() == "github: ok, created 1 (#1), ignored 0"

    shown = vigil("task", "show", "1", check=True).stdout
    assert "issue" in shown
    assert "octo/demo#7 https://github.com/octo/demo/issues/7" in shown
    task = json.loads(vigil("task", "show", "1", "--json", check=True).stdout)
    assert task["github"] == {"repo": "octo/demo", "issue": 7, "issue_url": "https://github.com/octo/demo/issues/7"}
    assert task["source_key"] == "github:octo/demo#7"

    hub.rate_limit_next(int(time.time()) + 3600)
    vigil("sensors", "run", "github", env=env, check=True)
    listed = vigil("sensors", "list", env=env, check=True).stdout
    assert "GitHub's rate limit: waiting until" in listed

    for path in home.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
