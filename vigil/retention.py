"""Retention: prune old history as ``[retention]`` says, and delete the transcript
files of the runs pruned.

``vigil run`` prunes every ``[retention] every`` (clock time) a bounded round of
batches, so a large backlog is cleared over several rounds while the loop keeps
the store between batches; ``vigil store prune`` runs one full prune on demand.
The store decides what may go (``Store.prune``); this module turns the settings
into cutoffs and removes the files. A transcript is deleted only if it lies inside
the home's ``logs/runs/`` folder: a path stored in the database never makes Vigil
delete a file anywhere else.

Every pass also removes the agents' workspaces under ``work/`` of tasks that
ended more than ``[dispatch] keep_workspace`` ago or no longer exist, whether
history retention is on or not: a scratch folder is deleted; a git worktree
(docs/coding.md) is removed through git, its branch kept unless ``[dispatch]
keep_branches`` is off and the branch was merged or its task failed or was
canceled (the branch of a task completed without a merge is its result: kept).

Every prune also folds the cost archive's hour rows older than ``HOUR_ROWS_MS``
into day rows (the budget's rolling day and the TUI's 24-hour chart need hours;
anything older is read by the day), and, when set, drops archive rows older than
``keep_costs`` and retired keys older than ``keep_keys``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vigil.clock import Clock, real_seconds
from vigil.clones import remove_clone
from vigil.config import Settings
from vigil.errors import InputError, TaskNotFound, VigilError
from vigil.home import remove_scratch, scratch_path, scratch_task_ids
from vigil.models import FINISHED_STATUSES, PruneResult, Task, TaskStatus

if TYPE_CHECKING:
    from vigil.store import Store

log = logging.getLogger("vigil.retention")

BATCH_TASKS = 200  # tasks per transaction: a few ms of write lock each
ROUND_BATCHES = 25  # the daemon's round: at most 5,000 tasks, then it waits
BACKLOG_PAUSE_S = 1.0  # real seconds between rounds while a backlog is left
# The archive keeps hours for the 48 h before a prune, counted back to the start of
# that UTC day (48-72 h): twice the budget's window and the TUI's 24-hour chart.
HOUR_ROWS_MS = 48 * 3_600_000


@dataclass(frozen=True)
class Pruned:
    """One prune: what the store removed and how many transcript files went."""

    result: PruneResult
    files_removed: int
    workspaces: int = 0  # scratch folders and worktrees removed (on a dry run: that would be)

    def describe(self) -> str:
        r = self.result
        return (
            f"{r.tasks} finished task(s), {r.runs} run(s), {r.events} event(s), {r.notes} note(s), "
            f"{r.dependencies} dependency row(s), {self.files_removed} transcript file(s), "
            f"{r.folded} archive hour row(s) folded into days, {r.costs} archive row(s), {r.keys} retired key(s), "
            f"{self.workspaces} workspace(s)"
        )


def transcripts_dir(settings: Settings) -> Path:
    """Where run transcripts are written (``logs/runs/`` in the home)."""
    return settings.logs_dir / "runs"


def remove_transcripts(paths: Iterable[str], folder: Path, home: Path) -> int:
    """Delete the files among ``paths`` (relative ones are taken from ``home``)
    that resolve to a place inside ``folder``; returns how many were deleted.
    Missing files are skipped; a file that cannot be deleted is logged."""
    inside = folder.resolve()
    removed = 0
    for stored in paths:
        path = Path(stored)
        target = (path if path.is_absolute() else home / path).resolve()
        if not target.is_relative_to(inside) or target == inside:
            log.warning("transcript %s is outside %s: left alone", stored, folder)
            continue
        try:
            target.unlink()
        except FileNotFoundError:
            continue
        except OSError as err:
            log.warning("cannot delete transcript %s: %s", target, err.strerror)
            continue
        removed += 1
    return removed


async def prune_history(
    store: Store,
    settings: Settings,
    now_ms: int,
    *,
    keep_finished_ms: int | None = None,
    dry_run: bool = False,
    max_batches: int | None = None,
) -> Pruned:
    """Prune what ``[retention]`` (or ``keep_finished_ms``, which wins) lets go as of
    ``now_ms``, then delete the transcripts (not on a dry run: it only counts them).
    Raises ``InputError`` when nothing is configured to prune."""
    retention = settings.retention
    keep = keep_finished_ms if keep_finished_ms is not None else retention.keep_finished_ms
    if keep is None and not _any_on(settings):
        raise InputError("retention is off: set [retention] keep_finished in vigil.toml, or pass --older-than")
    result = await store.prune(
        # 0: no finished task is that old, so only audit rows are pruned
        finished_before_ms=0 if keep is None else now_ms - keep,
        events_before_ms=_before(now_ms, retention.keep_events_ms),
        batch_size=BATCH_TASKS,
        max_batches=max_batches,
        dry_run=dry_run,
        fold_before_ms=now_ms - HOUR_ROWS_MS,
        costs_before_ms=_before(now_ms, retention.keep_costs_ms),
        keys_before_ms=_before(now_ms, retention.keep_keys_ms),
    )
    workspaces = await prune_workspaces(store, settings, now_ms, dry_run=dry_run)
    if dry_run:
        return Pruned(result, 0, workspaces)
    files = remove_transcripts(result.transcripts, transcripts_dir(settings), settings.home)
    return Pruned(result, files, workspaces)


async def prune_workspaces(store: Store, settings: Settings, now_ms: int, *, dry_run: bool = False) -> int:
    """Remove the workspaces under ``work/`` of tasks that ended more than
    ``[dispatch] keep_workspace`` before ``now_ms``, or that no longer exist; returns
    how many went (on a dry run, how many would). A worktree git cannot remove is
    logged and left for the next pass."""
    cutoff = now_ms - settings.dispatch.keep_workspace_ms
    folders: list[int] = []
    worktrees: list[Task] = []
    for task_id in scratch_task_ids(settings.home):
        try:
            task = await store.get_task(task_id)
        except TaskNotFound:
            folders.append(task_id)  # no record left of what it was: only the folder goes
            continue
        if task.status not in FINISHED_STATUSES or (task.completed_at or task.updated_at) > cutoff:
            continue
        if task.worktree is not None and Path(task.worktree.path) == scratch_path(settings.home, task_id):
            worktrees.append(task)
        else:
            folders.append(task_id)
    if dry_run:
        return len(folders) + len(worktrees)
    removed = remove_scratch(settings.home, folders)
    for task in worktrees:
        assert task.worktree is not None
        try:
            await asyncio.to_thread(remove_clone, task.worktree, delete_ref=_branch_goes(task, settings))
        except VigilError as err:
            log.warning("cannot remove task #%d's worktree %s: %s", task.id, task.worktree.path, err)
            continue
        removed += 1
    return removed


def _branch_goes(task: Task, settings: Settings) -> bool:
    """Whether a finished task's ref (``refs/vigil/tasks/<id>``) is deleted with its
    clone: only when ``keep_branches`` is off and the change was merged, or its
    task was discarded (failed, canceled). A change left on a branch for a pull
    request is kept (on that branch)."""
    if settings.dispatch.keep_branches or task.worktree is None:
        return False
    if task.status is not TaskStatus.COMPLETED:
        return True
    return task.worktree.merged is not None and task.worktree.merge != "branch"


def _before(now_ms: int, keep_ms: int | None) -> int | None:
    return None if keep_ms is None else now_ms - keep_ms


def _any_on(settings: Settings) -> bool:
    """Whether ``[retention]`` asks for anything to be deleted."""
    r = settings.retention
    return any(keep is not None for keep in (r.keep_finished_ms, r.keep_events_ms, r.keep_costs_ms, r.keep_keys_ms))


async def keep_pruned(store: Store, settings: Settings, clock: Clock, stop: asyncio.Event) -> None:
    """The daemon's retention: a round of at most ``ROUND_BATCHES`` batches now and
    every ``[retention] every`` of clock time until ``stop``; sooner while a backlog
    is left. Logs what each round removed; a failed round is logged and retried at
    the next one. With history retention off, each round only removes expired
    scratch workspaces."""
    retention = settings.retention
    while not stop.is_set():
        wait_s = real_seconds(clock, retention.every_ms)
        try:
            if _any_on(settings):
                pruned = await prune_history(store, settings, clock.now_ms(), max_batches=ROUND_BATCHES)
            else:
                workspaces = await prune_workspaces(store, settings, clock.now_ms())
                pruned = Pruned(PruneResult(complete=True), 0, workspaces)
        except VigilError as err:
            log.warning("pruning old history failed: %s", err)
        else:
            r = pruned.result
            if r.tasks or r.events or r.folded or r.costs or r.keys or pruned.workspaces:
                log.info("pruned %s", pruned.describe())
            if not pruned.result.complete:
                wait_s = min(wait_s, BACKLOG_PAUSE_S)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait_s)
