"""The GitHub loop with the real Claude Code (the scripted model server, the
scripted GitHub of tests/github_server.py, a real bare remote).

* Without review, the agent's success is pushed and opened as a pull request at
  once; a reviewer requests changes; the github sensor sends the task back once;
  the next attempt resumes the agent's own session (the model server sees the
  earlier conversation, and the review as the new message) and its result is
  pushed to the same branch: the pull request's head moves, no second one.
* Issue 34's "done when", end to end: an issue labelled ``vigil`` becomes a task;
  the agent's reviewed fix becomes a pull request that says ``Closes #7``; a
  review comment and then a failing check each bring the task back to the agent
  exactly once, and each approved fix moves the same pull request's head; the
  merge is recorded. The token, in the environment of every ``vigil`` the
  operator runs, is nowhere an agent or a log could read it: not in what the
  agent's ``env`` printed, any request the model server received, the agent CLI's
  own files, nor any file of the home (database, logs, transcripts).
"""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agents import anthropic_api
from tests.agents.anthropic_api import vigil_tool
from tests.agents.clis import needs_claude
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Text, ToolCall
from tests.code.repos import Repo
from tests.github_server import GitHubServer, github_server

pytestmark = pytest.mark.slow  # the real Claude Code

TOKEN = "ghp_feedback0123456789secret"


def remote_tip(remote: Path, branch: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(remote), "rev-parse", f"refs/heads/{branch}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def project(tmp_path: Path) -> tuple[Repo, Path]:
    """The operator's repository and its remote (a bare repository), main pushed."""
    repo = Repo.make(tmp_path / "project", {"parser.py": "one\ntwo\n"})
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    repo.git("remote", "add", "origin", str(remote))
    repo.git("push", "--quiet", "origin", "main")
    return repo, remote


def github_home(tmp_path: Path, model_url: str, hub: GitHubServer, repo: Repo, *, review: bool) -> ClaudeHome:
    """A home whose github sensor watches octo/demo and whose skill fixes its issues
    in ``repo``, as pull requests."""
    home = ClaudeHome.initialised(tmp_path, model_url)
    skill = home.path / "skills" / "fix-issue"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        f"---\ndescription: Fix a GitHub issue\nrepo: {repo.path}\nreview: {str(review).lower()}\n"
        "merge: pull_request\n---\nFix the issue.\n"
    )
    with (home.path / "vigil.toml").open("a") as handle:
        handle.write(
            f'\n[github]\napi_url = "{hub.api_url}"\n'
            f'\n[[sensors]]\nuse = "github"\nrepo = "octo/demo"\napi_url = "{hub.api_url}"\n'
            'skills = ["fix-issue"]\n'
        )
    return home


def vigil_ok(home: ClaudeHome, *args: str) -> str:
    """``vigil ARGS`` as the operator runs it, the token in its environment; its
    stdout. What it printed (its log on stderr included) never holds the token."""
    done = home.vigil(*args, timeout=120, GITHUB_TOKEN=TOKEN)
    assert done.returncode == 0, done.stdout + done.stderr
    assert TOKEN not in done.stdout + done.stderr
    return done.stdout


def user_text(body: dict[str, Any]) -> str:
    """The text of a request's last user message (a resumed run's new message)."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content if isinstance(block, dict))


def github_notes(home: ClaudeHome) -> list[str]:
    return [text for author, text in home.notes(1) if author == "sensor:github"]


def github_events(home: ClaudeHome) -> list[str]:
    rows = home.rows("SELECT to_value FROM task_events WHERE task_id = 1 AND kind = 'github' ORDER BY id")
    return [row["to_value"] for row in rows]


def assert_token_nowhere(tmp_path: Path, conversations: list[dict[str, Any]]) -> None:
    """Not in any request to the model (what the agent's commands printed is in
    them), the agent CLI's own files (its session transcripts), nor the home's."""
    assert TOKEN not in json.dumps(conversations)
    for folder in (tmp_path / "home", tmp_path / "operator"):
        for path in folder.rglob("*"):
            if path.is_file():
                assert TOKEN.encode() not in path.read_bytes(), path


@needs_claude
def test_changes_requested_resume_the_agents_session_and_its_next_success_updates_the_same_pull_request(
    tmp_path: Path,
) -> None:
    repo, remote = project(tmp_path)
    with anthropic_api.anthropic_server() as api, github_server(token=TOKEN, remote=remote) as hub:
        home = github_home(tmp_path, api.server.url, hub, repo, review=False)
        hub.add_issue(7, "The parser crashes on empty input")
        assert vigil_ok(home, "sensors", "run", "github").strip() == "github: ok, created 1 (#1), ignored 0"

        api.script.add(
            ToolCall("Bash", {"command": "printf 'one\\n2\\n' > parser.py"}),
            vigil_tool("close", status="completed", summary="Empty input is handled."),
            Text("Empty input is handled."),
        )
        vigil_ok(home, "dispatch", "once")
        assert home.task(1)["status"] == "completed"  # no review: its pull request is opened at once
        (number,) = hub.pulls
        branch = hub.pulls[number]["head"]["ref"]
        first_push = remote_tip(remote, branch)
        assert "Closes #7" in hub.pulls[number]["body"]

        hub.add_review(
            number,
            "CHANGES_REQUESTED",
            "Handle None as well.",
            comments=(("parser.py", 2, "Add a test for this line."),),
        )
        vigil_ok(home, "sensors", "run", "github")
        vigil_ok(home, "sensors", "run", "github")  # seen: nothing more
        task = home.task(1)
        assert (task["status"], task["review"]) == ("pending", "rejected")

        api.script.add(
            ToolCall("Bash", {"command": "printf 'one\\n2\\nnone\\n' > parser.py"}),
            Text("None is handled too."),
        )
        before = len(api.conversation())
        vigil_ok(home, "dispatch", "once")
        conversations = api.conversation()
        vigil_ok(home, "sensors", "run", "github")  # reads the pull request again: its head is the new push

    resumed = conversations[before]  # the resumed run's first request to the model
    assert "printf 'one\\\\n2\\\\n' > parser.py" in json.dumps(resumed["messages"])  # the earlier conversation
    said = user_text(resumed)
    assert "was sent back to you" in said
    assert "Handle None as well." in said
    assert "Add a test for this line." in said
    assert "Written on GitHub by @bob (member), quoted" in said
    first, second = home.runs(1)
    assert (second["outcome"], second["resumed_from"]) == ("success", first["id"])
    task = home.task(1)
    assert task["status"] == "completed"
    assert list(hub.pulls) == [number]  # the same pull request
    second_push = remote_tip(remote, branch)
    assert second_push != first_push
    assert hub.pulls[number]["head"]["sha"] == second_push == json.loads(task["worktree"])["artifact"]
    repo.git("merge-base", "--is-ancestor", first_push, second_push)  # a fast-forward (git asserts it)
    assert repo.show(second_push, "parser.py") == "one\n2\nnone"
    (review,) = github_notes(home)  # once, over two polls
    assert f"octo/demo#{number}" in review
    assert_token_nowhere(tmp_path, conversations)
    assert hub.problems == []


@needs_claude
def test_done_when_an_issue_becomes_a_reviewed_pull_request_and_a_review_and_a_failing_check_each_come_back_once(
    tmp_path: Path,
) -> None:
    repo, remote = project(tmp_path)
    with anthropic_api.anthropic_server() as api, github_server(token=TOKEN, remote=remote) as hub:
        home = github_home(tmp_path, api.server.url, hub, repo, review=True)
        hub.add_issue(7, "The parser crashes on empty input", "Calling parse('') raises IndexError.")
        assert vigil_ok(home, "sensors", "run", "github").strip() == "github: ok, created 1 (#1), ignored 0"

        # the fix, reviewed and approved: a pull request that closes the issue
        api.script.add(
            ToolCall("Bash", {"command": "env; printf 'one\\n2\\n' > parser.py"}),
            Text("Empty input is handled."),
        )
        vigil_ok(home, "dispatch", "once")
        assert home.task(1)["review"] == "pending"
        approved = vigil_ok(home, "task", "approve", "1")
        (number,) = hub.pulls
        assert approved.strip().endswith(f"pull request https://github.com/octo/demo/pull/{number} (opened)")
        pull = hub.pulls[number]
        branch = pull["head"]["ref"]
        assert "Closes #7" in pull["body"]
        pushes = [remote_tip(remote, branch)]

        # a review comment: back once, to the agent's own session
        hub.add_review(number, "COMMENTED", "", comments=(("parser.py", 2, "Name this constant."),))
        vigil_ok(home, "sensors", "run", "github")
        vigil_ok(home, "sensors", "run", "github")
        assert (home.task(1)["status"], github_events(home)) == ("pending", ["review comments"])
        api.script.add(ToolCall("Bash", {"command": "printf 'one\\nTWO = 2\\n' > parser.py"}), Text("Named it."))
        vigil_ok(home, "dispatch", "once")
        vigil_ok(home, "task", "approve", "1")
        pushes.append(remote_tip(remote, branch))

        # a failing check on the new head: back once, with what the check said
        hub.add_check_run(pushes[-1], "ci / tests", "failure", "1 failed: test_parse_none", suite=31)
        vigil_ok(home, "sensors", "run", "github")
        vigil_ok(home, "sensors", "run", "github")
        assert home.task(1)["status"] == "pending"
        api.script.add(
            ToolCall("Bash", {"command": "printf 'one\\nTWO = 2\\nnone\\n' > parser.py"}), Text("Fixed the test.")
        )
        vigil_ok(home, "dispatch", "once")
        vigil_ok(home, "task", "approve", "1")
        pushes.append(remote_tip(remote, branch))

        # merged on GitHub: recorded
        hub.end_pull(number, merged=True)
        vigil_ok(home, "sensors", "run", "github")
        vigil_ok(home, "sensors", "run", "github")
        conversations = api.conversation()

    assert list(hub.pulls) == [number]  # one pull request throughout
    assert len(set(pushes)) == 3
    for older, newer in itertools.pairwise(pushes):
        repo.git("merge-base", "--is-ancestor", older, newer)  # each a fast-forward
    assert hub.pulls[number]["head"]["sha"] == pushes[-1]
    assert github_events(home) == ["review comments", "checks failed", "merged"]  # each exactly once
    review, checks, merged = github_notes(home)
    assert "Name this constant." in review
    assert "ci / tests: failure" in checks
    assert "1 failed: test_parse_none" in checks
    assert merged.startswith(f"Pull request octo/demo#{number} merged")
    task = home.task(1)
    assert (task["status"], task["review"]) == ("completed", "approved")
    first, second, third = home.runs(1)
    assert (second["resumed_from"], third["resumed_from"]) == (first["id"], second["id"])
    assert "Name this constant." in user_text(conversations[2])  # the second run's first request
    assert "1 failed: test_parse_none" in json.dumps(conversations[-1]["messages"][-3:])
    assert "PATH=" in json.dumps(conversations)  # the agent's `env` printed its environment
    assert_token_nowhere(tmp_path, conversations)
    assert hub.problems == []
