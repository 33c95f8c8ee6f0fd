"""``vigil task approve`` on a real repository, run as the real binary: it lands
exactly the change reviewed (``--commit``), and a ``kill -9`` after any of its git
steps leaves the repository as before or as after (never a ``MERGE_HEAD``, a
conflict marker or a staged squash in the person's checkout), with a re-run
completing what was begun, once."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.code.repos import Repo, worked_clone
from tests.conftest import VigilRunner
from vigil.config import load_settings
from vigil.home import scratch_path
from vigil.models import NewTask, Outcome, OutcomeKind
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow

REAL_GIT = shutil.which("git") or "git"
# Runs the real git, then, at the call the counter file names, kills the process
# that started it (vigil task approve) with SIGKILL: a crash right after that step.
KILLING_GIT = """#!/bin/sh
"{git}" "$@"
status=$?
count=$(($(cat "{counter}") + 1))
echo "$count" > "{counter}"
if [ "$count" -eq "$(cat "{target}")" ]; then kill -9 "$PPID"; fi
exit $status
"""


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app", {"parser.py": "one\ntwo\n", "README.md": "app\n"})


def awaiting_review(home: Path, repo: Repo, merge: str) -> tuple[int, str]:
    """A task whose 'agent' changed parser.py, awaiting review; its id and change."""

    async def setup() -> tuple[int, str]:
        store = await SqliteStore.open(load_settings(home).store.path)
        try:
            added = await store.add_task(NewTask("Fix the parser"))
            assert added.task_id is not None
            made = worked_clone(
                repo, scratch_path(home, added.task_id), {"parser.py": "one\n2\n"}, task_id=added.task_id
            )
            await store.set_worktree(added.task_id, replace(made, merge=merge))
            claim = await store.claim_next(worker="d", lease_ms=60_000)
            assert claim is not None
            await store.record(claim, Outcome(OutcomeKind.SUCCESS, summary="fixed", review=True), worker="d")
            assert made.artifact is not None
            return added.task_id, made.artifact
        finally:
            await store.close()

    return asyncio.run(setup())


def test_approve_lands_only_the_commit_named(vigil: VigilRunner, home: Path, repo: Repo) -> None:
    task_id, artifact = awaiting_review(home, repo, "squash")
    before = repo.tip("main")
    stale = vigil("task", "approve", str(task_id), "--commit", "0123456789abcdef")
    assert stale.returncode == 2
    assert f"not the 0123456789abcdef you reviewed: look at it again (vigil task diff {task_id})" in stale.stderr
    assert "Traceback" not in stale.stderr
    assert repo.tip("main") == before
    done = vigil("task", "approve", str(task_id), "--commit", artifact[:10], check=True)
    assert "merged into main (squash)" in done.stdout
    assert repo.show("main", "parser.py") == "one\n2"


def test_a_dirty_checkout_of_the_base_is_refused_without_suggesting_a_stash(
    vigil: VigilRunner, home: Path, repo: Repo
) -> None:
    task_id, _ = awaiting_review(home, repo, "merge")
    (repo.path / "README.md").write_text("a person's edit in progress\n")
    refused = vigil("task", "approve", str(task_id))
    assert refused.returncode == 1
    assert "uncommitted changes to tracked files" in refused.stderr
    assert "stash" not in refused.stderr
    assert (repo.path / "README.md").read_text() == "a person's edit in progress\n"
    assert repo.log("main") == ["first commit"]


def approve_killed_at(home: Path, task_id: int, step: int, shim: Path) -> subprocess.CompletedProcess[str]:
    """``vigil task approve`` with git killing it after git call ``step``."""
    (shim / "counter").write_text("0\n")
    (shim / "target").write_text(f"{step}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    env["PATH"] = f"{shim / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [sys.executable, "-m", "vigil", "--home", str(home), "task", "approve", str(task_id)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("mode", ["squash", "merge"])
def test_a_kill_after_any_git_step_of_approve_leaves_before_or_after_and_a_rerun_finishes(
    vigil: VigilRunner, home: Path, tmp_path: Path, mode: str
) -> None:
    """For each step in turn, from a fresh repository and task: approve killed right
    after that git call, the state checked, approve run again to its end."""
    shim = tmp_path / "shim"
    (shim / "bin").mkdir(parents=True)
    git = shim / "bin" / "git"
    git.write_text(KILLING_GIT.format(git=REAL_GIT, counter=shim / "counter", target=shim / "target"))
    git.chmod(0o755)
    step = 1
    while True:
        repo = Repo.make(tmp_path / f"app{step}", {"parser.py": "one\ntwo\n", "README.md": "app\n"})
        task_id, _ = awaiting_review(home, repo, mode)
        base = repo.tip("main")
        proc = approve_killed_at(home, task_id, step, shim)
        if proc.returncode != -signal.SIGKILL:
            assert int((shim / "counter").read_text()) < step  # it ran to its end first
            assert proc.returncode == 0, proc.stderr
            break
        # before or after, never half: main at the base or the merge on it; no merge in
        # progress, no conflict marker; nothing staged but the merge the base now has
        tip = repo.tip("main")
        assert tip == base or base in repo.git("rev-parse", f"{tip}^@").split(), step
        assert not (repo.path / ".git" / "MERGE_HEAD").exists()
        assert not (repo.path / ".git" / "SQUASH_MSG").exists()
        assert "<<<<<<<" not in (repo.path / "parser.py").read_text()
        staged = repo.git("diff", "--cached", "--name-only")
        assert staged in ("", "parser.py"), step
        assert not staged or tip != base, step  # the checkout may only lag behind a base that moved
        again = vigil("task", "approve", str(task_id))
        assert again.returncode == 0, (step, again.stderr)
        assert "merged into main" in again.stdout
        assert repo.show("main", "parser.py") == "one\n2"
        assert repo.git("status", "--porcelain") == ""
        assert (repo.path / "parser.py").read_text() == "one\n2\n"
        assert repo.git("rev-list", "--count", f"{base}..main") == ("1" if mode == "squash" else "2")
        assert '"status": "completed"' in vigil("task", "show", str(task_id), "--json", check=True).stdout
        step += 1
    assert step > 5  # approve takes several git steps, each of them was cut once
