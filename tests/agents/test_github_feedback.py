"""A review on the pull request comes back to the real Claude Code (the scripted
model server, the scripted GitHub, a real bare remote): a labelled issue becomes a
task, the agent's change is approved into a pull request, a reviewer requests
changes, the github sensor sends the task back, the agent's next prompt quotes the
review, and approving its new change pushes it to the same branch and pull request.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.agents import anthropic_api
from tests.agents.anthropic_api import vigil_tool
from tests.agents.clis import needs_claude
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Text, ToolCall
from tests.code.repos import Repo
from tests.github_server import github_server

pytestmark = pytest.mark.slow  # the real Claude Code

TOKEN = "ghp_feedback0123456789secret"


def remote_tip(remote: Path, branch: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(remote), "rev-parse", f"refs/heads/{branch}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@needs_claude
def test_changes_requested_bring_the_task_back_and_the_agents_next_prompt_quotes_them(tmp_path: Path) -> None:
    repo = Repo.make(tmp_path / "project", {"parser.py": "one\ntwo\n"})
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    repo.git("remote", "add", "origin", str(remote))
    repo.git("push", "--quiet", "origin", "main")
    with anthropic_api.anthropic_server() as api, github_server(token=TOKEN, remote=remote) as hub:
        home = ClaudeHome.initialised(tmp_path, api.server.url)
        skill = home.path / "skills" / "fix-issue"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            f"---\ndescription: Fix a GitHub issue\nrepo: {repo.path}\nreview: true\nmerge: pull_request\n---\n"
            "Fix the issue.\n"
        )
        with (home.path / "vigil.toml").open("a") as handle:
            handle.write(
                f'\n[github]\napi_url = "{hub.api_url}"\n'
                f'\n[[sensors]]\nuse = "github"\nrepo = "octo/demo"\napi_url = "{hub.api_url}"\n'
                'skills = ["fix-issue"]\n'
            )
        hub.add_issue(7, "The parser crashes on empty input")
        first = home.vigil("sensors", "run", "github", GITHUB_TOKEN=TOKEN)
        assert first.stdout.strip() == "github: ok, created 1 (#1), ignored 0", first.stderr

        api.script.add(
            ToolCall("Bash", {"command": "printf 'one\\n2\\n' > parser.py"}),
            vigil_tool("close", status="completed", summary="Empty input is handled."),
            Text("Fixed."),
        )
        assert home.vigil("dispatch", "once", timeout=120).returncode == 0
        approved = home.vigil("task", "approve", "1", GITHUB_TOKEN=TOKEN)
        assert approved.returncode == 0, approved.stderr
        (number,) = hub.pulls
        branch = hub.pulls[number]["head"]["ref"]
        first_push = remote_tip(remote, branch)

        hub.add_review(
            number,
            "CHANGES_REQUESTED",
            "Handle None as well.",
            comments=(("parser.py", 2, "Add a test for this line."),),
        )
        back = home.vigil("sensors", "run", "github", GITHUB_TOKEN=TOKEN)
        assert back.returncode == 0, back.stderr
        assert home.vigil("sensors", "run", "github", GITHUB_TOKEN=TOKEN).returncode == 0  # seen: nothing more
        task = home.task(1)
        assert (task["status"], task["review"]) == ("pending", "rejected")

        api.script.add(
            ToolCall("Bash", {"command": "printf 'one\\n2\\nnone\\n' > parser.py"}),
            vigil_tool("close", status="completed", summary="None is handled too."),
            Text("Done."),
        )
        assert home.vigil("dispatch", "once", timeout=120).returncode == 0
        again = home.vigil("task", "approve", "1", GITHUB_TOKEN=TOKEN)
        assert again.returncode == 0, again.stderr
        conversations = api.conversation()

    second_prompt = json.dumps(conversations[-1]["messages"][0]["content"])
    assert "Handle None as well." in second_prompt
    assert "Add a test for this line." in second_prompt
    assert "Written on GitHub by @bob (member), quoted" in second_prompt
    assert "Handle None as well." not in json.dumps(conversations[0]["messages"][0]["content"])
    assert list(hub.pulls) == [number]  # the same pull request
    second_push = remote_tip(remote, branch)
    assert second_push != first_push
    repo.git("merge-base", "--is-ancestor", first_push, second_push)  # a fast-forward (git asserts it)
    (review,) = [text for author, text in home.notes(1) if author == "sensor:github"]  # once, over two polls
    assert f"octo/demo#{number}" in review
    assert TOKEN not in json.dumps(conversations)
    for path in home.path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert hub.problems == []
