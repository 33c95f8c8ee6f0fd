"""Retention and clones: a finished task's clone is removed once
``keep_workspace`` has passed, its change's ref kept unless ``keep_branches`` is off
and the change was merged or its task discarded; an open task's clone stays;
``vigil store prune`` counts them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.code.repos import Repo, worked_clone
from tests.store.contract import ending
from vigil import git
from vigil.clock import ManualClock
from vigil.codework import Worktree
from vigil.commands import prune_report
from vigil.config import Settings, load_settings
from vigil.home import scratch_path
from vigil.models import NewTask, Outcome, OutcomeKind, TaskStatus
from vigil.retention import prune_workspaces
from vigil.store.sqlite import SqliteStore

DAY_MS = 86_400_000


@pytest.fixture
def settings(home: Path) -> Settings:
    return load_settings(home)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app")


async def _task_with_worktree(store: SqliteStore, settings: Settings, repo: Repo, subject: str) -> Worktree:
    added = await store.add_task(NewTask(subject))
    assert added.task_id is not None
    path = scratch_path(settings.home, added.task_id)
    made = worked_clone(repo, path, {f"{added.task_id}.txt": subject}, task_id=added.task_id, subject=subject)
    await store.set_worktree(added.task_id, made)
    return made


async def _end(store: SqliteStore, status: TaskStatus, merged: Worktree | None = None) -> int:
    claim = await store.claim_next(worker="w", lease_ms=60_000)
    assert claim is not None
    if status is TaskStatus.BLOCKED:
        await store.record(claim, Outcome(OutcomeKind.SUCCESS, review=True), worker="w")
    elif merged is not None:
        await store.record(claim, Outcome(OutcomeKind.SUCCESS, review=True), worker="w")
        await store.approve(claim.task.id, actor="human", merged=merged)
    else:
        await store.record(claim, ending(status), worker="w")
    return claim.task.id


async def test_finished_tasks_worktrees_go_after_keep_workspace_and_their_branches_stay(
    store: SqliteStore, settings: Settings, repo: Repo, clock: ManualClock
) -> None:
    merged = await _task_with_worktree(store, settings, repo, "merged")
    await _end(store, TaskStatus.COMPLETED, replace(merged, merge="ff", merged=merged.artifact))
    failed = await _task_with_worktree(store, settings, repo, "failed")
    await _end(store, TaskStatus.FAILED)
    waiting = await _task_with_worktree(store, settings, repo, "awaiting review")
    await _end(store, TaskStatus.BLOCKED)
    assert await prune_workspaces(store, settings, clock.now_ms()) == 0  # kept keep_workspace long
    later = clock.now_ms() + settings.dispatch.keep_workspace_ms + DAY_MS
    assert await prune_workspaces(store, settings, later, dry_run=True) == 2
    assert await prune_workspaces(store, settings, later) == 2
    assert not Path(merged.path).exists()
    assert not Path(failed.path).exists()
    assert (Path(waiting.path) / ".git").is_dir()
    at = git.Checkout(repo.path)
    assert all(git.commit_of(at, w.ref or "") == w.artifact for w in (merged, failed, waiting))
    assert await prune_workspaces(store, settings, later) == 0


async def test_without_keep_branches_merged_and_discarded_branches_go_and_a_left_branch_stays(
    store: SqliteStore, settings: Settings, repo: Repo, clock: ManualClock
) -> None:
    settings = replace(settings, dispatch=replace(settings.dispatch, keep_branches=False))
    merged = await _task_with_worktree(store, settings, repo, "merged")
    await _end(store, TaskStatus.COMPLETED, replace(merged, merge="squash", merged=repo.tip("main")))
    left = await _task_with_worktree(store, settings, repo, "left for a pull request")
    await _end(store, TaskStatus.COMPLETED, replace(left, merge="branch", merged=left.artifact))
    unreviewed = await _task_with_worktree(store, settings, repo, "completed without review")
    await _end(store, TaskStatus.COMPLETED)
    canceled = await _task_with_worktree(store, settings, repo, "canceled")
    await _end(store, TaskStatus.CANCELED)
    later = clock.now_ms() + settings.dispatch.keep_workspace_ms + DAY_MS
    assert await prune_workspaces(store, settings, later) == 4
    at = git.Checkout(repo.path)
    kept = {w.branch: git.commit_of(at, w.ref or "") is not None for w in (merged, left, unreviewed, canceled)}
    assert kept == {merged.branch: False, left.branch: True, unreviewed.branch: True, canceled.branch: False}


async def test_store_prune_reports_the_worktrees_it_removes(store: SqliteStore, settings: Settings, repo: Repo) -> None:
    made = await _task_with_worktree(store, settings, repo, "done")
    await _end(store, TaskStatus.COMPLETED)
    settings = replace(settings, dispatch=replace(settings.dispatch, keep_workspace_ms=0))
    assert "remove 1 workspace(s)" in await prune_report(store, settings, "1d", dry_run=True, as_json=False)
    assert Path(made.path).exists()
    report = await prune_report(store, settings, "1d", dry_run=False, as_json=False)
    assert report.endswith("1 workspace(s)")
    assert not Path(made.path).exists()
