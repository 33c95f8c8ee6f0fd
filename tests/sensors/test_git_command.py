"""The git sensor on a real repository and the command sensor with real programs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sensors.api import FoundTask, SensorContext
from sensors.builtin.command import command
from sensors.builtin.git import git
from sensors.execution import SensorReport
from tests.sensors.conftest import RunnerFactory, SpecFactory, make_skills
from vigil.store.sqlite import SqliteStore


async def other(ctx: SensorContext) -> list[FoundTask]:
    return [FoundTask(key="other", subject="the other sensor ran")]


async def run(make_runner: RunnerFactory, make_spec: SpecFactory, func: Any, **kw: Any) -> SensorReport:
    spec = make_spec(func, timeout_ms=kw.pop("timeout_ms", 10_000), max_tasks=kw.pop("max_tasks", 100), options=kw)
    reports = await make_runner(spec, make_spec(other)).run_now()
    assert reports[1].ok
    return reports[0]


# --- git ----------------------------------------------------------------------------


def sh(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.org",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def commit(repo: Path, message: str) -> str:
    (repo / "file.txt").write_text(message)
    sh(repo, "add", "file.txt")
    sh(repo, "commit", "-q", "-m", message)
    return sh(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    sh(path, "init", "-q", "-b", "main")
    commit(path, "initial")
    return path


async def test_git_new_commits_become_tasks_in_order(
    store: SqliteStore, repo: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    first = await run(make_runner, make_spec, git, repo="project", branch="main")
    assert (first.status, first.created) == ("ok", 0)  # the first run records the tip
    a = commit(repo, "Add the parser\n\nWith a body line.")
    b = commit(repo, "Fix the parser")
    second = await run(make_runner, make_spec, git, repo="project", branch="main")
    assert second.created == 2
    tasks = [t for t in await store.list_tasks() if t.source == "sensor:git"]
    assert [t.source_key for t in reversed(tasks)] == [f"git:{a}", f"git:{b}"]
    assert tasks[1].subject == "New commit on main in project: Add the parser"
    assert "With a body line." in tasks[1].description
    assert "Ada <ada@example.org>" in tasks[1].description
    third = await run(make_runner, make_spec, git, repo="project", branch="main")
    assert (third.created, third.ignored) == (0, 0)


async def test_git_follows_the_cap_and_picks_up_the_rest_next_run(
    store: SqliteStore, repo: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    await run(make_runner, make_spec, git, repo="project")
    for i in range(5):
        commit(repo, f"commit {i}")
    first = await run(make_runner, make_spec, git, repo="project", max_tasks=3)
    second = await run(make_runner, make_spec, git, repo="project", max_tasks=3)
    assert (first.created, first.dropped, second.created) == (3, 0, 2)


async def test_git_rewritten_history_is_a_warning_and_a_new_cursor(
    store: SqliteStore, repo: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    await run(make_runner, make_spec, git, repo="project")
    commit(repo, "to be rewritten")
    await run(make_runner, make_spec, git, repo="project")
    sh(repo, "reset", "-q", "--hard", "HEAD~1")
    sh(repo, "reflog", "expire", "--expire=now", "--all")
    sh(repo, "gc", "-q", "--prune=now")
    tip = commit(repo, "after the rewrite")
    report = await run(make_runner, make_spec, git, repo="project")
    assert report.status == "ok"
    assert "is gone (history rewritten?)" in (report.error or "")
    state = next(s for s in await store.sensor_states() if s.name == "git")
    assert state.state["last"] == tip


async def test_git_missing_repository_is_a_sensor_error(
    store: SqliteStore, tmp_path: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    (tmp_path / "empty").mkdir()
    report = await run(make_runner, make_spec, git, repo="empty")
    assert report.status == "error"
    assert "GitFailed: git rev-parse" in (report.error or "")


# --- command ------------------------------------------------------------------------


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "sensor_script.py"
    path.write_text(body)
    return [sys.executable, str(path)]


async def test_command_json_lines_become_tasks_and_bad_lines_are_reported(
    store: SqliteStore, tmp_path: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    argv = script(
        tmp_path,
        """
import json, os
print(json.dumps({"key": "disk:/var", "subject": "Disk /var is 95% full", "priority": 2, "skills": ["ops"]}))
print("this is not json")
print()
print(json.dumps({"key": "", "subject": "no key"}))
print(json.dumps(["a", "list"]))
print(json.dumps({"key": "env", "subject": "sensor " + os.environ["VIGIL_SENSOR"], "dedup": "ever"}))
""",
    )
    make_skills(tmp_path, "ops")  # the home is tmp_path; a task's skills must exist in it
    report = await run(make_runner, make_spec, command, command=argv)
    assert (report.status, report.created) == ("ok", 2)
    assert report.error == (
        "3 malformed output line(s): line 2: not JSON (Expecting value); "
        "line 4: missing or empty 'key'; line 5: not a JSON object"
    )
    by_key = {t.source_key: t for t in await store.list_tasks()}
    disk = by_key["command:disk:/var"]
    assert (disk.subject, disk.priority, disk.skills) == ("Disk /var is 95% full", 2, ("ops",))
    assert by_key["command:env"].subject == "sensor command"
    assert str(by_key["command:env"].dedup) == "ever"
    state = next(s for s in await store.sensor_states() if s.name == "command")
    assert state.last_status == "ok"
    assert "line 2: not JSON" in (state.last_error or "")


async def test_command_non_zero_exit_fails_the_run_and_stores_nothing(
    store: SqliteStore, tmp_path: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    argv = script(
        tmp_path,
        "import sys\n"
        'print(\'{"key": "k", "subject": "s"}\')\n'
        'print("cannot reach the API", file=sys.stderr)\n'
        "sys.exit(3)",
    )
    report = await run(make_runner, make_spec, command, command=argv)
    assert report.status == "error"
    assert report.error == "CommandFailed: exited with status 3: cannot reach the API"
    assert [t.source for t in await store.list_tasks()] == ["sensor:other"]


async def test_command_timeout_kills_the_whole_process_group(
    store: SqliteStore, tmp_path: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    pid_file = tmp_path / "child.pid"
    argv = script(
        tmp_path,
        f"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open({str(pid_file)!r}, "w").write(str(child.pid))
time.sleep(600)
""",
    )
    report = await run(make_runner, make_spec, command, command=argv, timeout_ms=1500)
    assert report.status == "timeout"
    child = int(pid_file.read_text())
    # The grandchild was killed with its group: it is gone (or a zombie awaiting init).
    status = Path(f"/proc/{child}/status")
    assert not status.exists() or "State:\tZ" in status.read_text()


async def test_command_that_cannot_start_or_prints_too_much(
    store: SqliteStore, tmp_path: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    missing = await run(make_runner, make_spec, command, command=[str(tmp_path / "nope")])
    assert missing.status == "error"
    assert "cannot start" in (missing.error or "")
    chatty = await run(
        make_runner,
        make_spec,
        command,
        command=script(tmp_path, "import sys\nwhile True: sys.stdout.write('x' * 65536)"),
        max_output_bytes=100_000,
    )
    assert chatty.status == "error"
    assert "printed more than max_output_bytes (100000)" in (chatty.error or "")
