"""The Diff view in a real terminal (tmux): a task awaiting review, ``enter`` then
``D`` shows its branch's files and diff; ``a`` and ``y`` merge it into the base."""

from __future__ import annotations

import asyncio
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.code.repos import Repo, worked_clone
from tests.tui.test_terminal import UNSIZED, started, wait_screen
from vigil.config import load_settings
from vigil.home import scratch_path
from vigil.models import NewTask, Outcome, OutcomeKind
from vigil.store import open_store

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"), pytest.mark.slow]


def _awaiting_review(home: Path, repo: Repo) -> int:
    async def setup() -> int:
        settings = load_settings(home)
        store = await open_store(settings)
        try:
            added = await store.add_task(NewTask("Fix the parser"))
            assert added.task_id is not None
            path = scratch_path(home, added.task_id)
            made = worked_clone(repo, path, {"parser.py": "one\nTWO\n"}, task_id=added.task_id, message="shout two")
            await store.set_worktree(added.task_id, replace(made, merge="merge"))
            claim = await store.claim_next(worker="d", lease_ms=60_000)
            assert claim is not None
            await store.record(claim, Outcome(OutcomeKind.SUCCESS, summary="shouted", review=True), worker="d")
            return added.task_id
        finally:
            await store.close()

    return asyncio.run(setup())


def test_the_diff_view_and_approve_in_a_real_terminal(home: Path, tmp_path: Path) -> None:
    repo = Repo.make(tmp_path / "app", {"parser.py": "one\ntwo\n"})
    task_id = _awaiting_review(home, repo)
    command = f"env {UNSIZED} TERM=xterm-256color {sys.executable} -m vigil --home {home} tui; sleep 60"
    with started(tmp_path, "vigil-diff", 100, 30, command) as pane:
        wait_screen(pane, lambda s: "Fix the parser" in s, "the task in the queue")
        pane.keys("Enter")
        wait_screen(pane, lambda s: "attempts" in s and "Diff" in s, "the task screen, with its Diff key")
        pane.keys("D")
        screen = wait_screen(pane, lambda s: "against main: 1 file, +1 -1" in s, "the diff view")
        assert "+1 -1 parser.py" in screen
        assert "+TWO" in screen
        assert "-two" in screen
        pane.keys("a")
        wait_screen(pane, lambda s: "is merged into main (merge)" in s, "the confirmation")
        pane.keys("y")
        wait_screen(pane, lambda s: f"task #{task_id} approved; completed" in s, "the report")
        pane.keys("C-q")
    assert repo.show("main", "parser.py") == "one\nTWO"
    assert repo.log("main")[0] == "Fix the parser"
