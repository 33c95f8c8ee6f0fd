"""Contract: what the store keeps of code work. A task's own code options, and a
follow-up without its own getting its parent's; the worktree Vigil made for it;
each run's checks, changes and whether its result was gated; an approval that
merged, with the merge in the audit trail."""

from __future__ import annotations

from dataclasses import replace

from tests.store.contract import claim, new
from vigil.codework import Check, CheckResult, CodeOptions, RunChanges, Worktree
from vigil.models import ApprovalState, Outcome, OutcomeKind, TaskStatus
from vigil.store import Store

OPTIONS = CodeOptions(
    repo="/src/app", base="main", checks=(Check(("pytest", "-q"), 120_000), Check(("ruff", "check"))), review=True
)
WORKTREE = Worktree(
    repo="/src/app",
    git_dir="/src/app/.git",
    path="/home/agent/work/1",
    branch="vigil/1-fix-the-parser",
    base="main",
    start="a" * 40,
    ref="refs/vigil/tasks/1",
    artifact="b" * 40,
)


async def test_a_tasks_own_code_options_are_kept_and_a_follow_up_inherits_them(store: Store) -> None:
    parent = await store.add_task(new("fix the parser", code=OPTIONS))
    assert parent.task_id is not None
    assert (await store.get_task(parent.task_id)).code == OPTIONS
    child = await store.add_task(new("and its tests", parent_id=parent.task_id))
    assert child.task_id is not None
    assert (await store.get_task(child.task_id)).code == OPTIONS
    own = CodeOptions(review=False)
    other = await store.add_task(new("its own", parent_id=parent.task_id, code=own))
    assert other.task_id is not None
    assert (await store.get_task(other.task_id)).code == own
    plain = await store.add_task(new("no code"))
    assert plain.task_id is not None
    assert (await store.get_task(plain.task_id)).code is None


async def test_the_worktree_made_for_a_task_is_recorded_on_it(store: Store) -> None:
    added = await store.add_task(new("fix the parser"))
    assert added.task_id is not None
    task = await store.set_worktree(added.task_id, WORKTREE)
    assert task.worktree == WORKTREE
    assert (await store.get_task(added.task_id)).worktree == WORKTREE


async def test_a_run_records_its_checks_its_changes_and_whether_it_was_gated(store: Store) -> None:
    await store.add_task(new("fix the parser"))
    claimed = await claim(store)
    await store.set_run_process(claimed.run_id, pid=10, pgid=10, proc_start=None, workspace="/w", gated=True)
    checks = (
        CheckResult(("ruff", "check"), 0, "All checks passed!"),
        CheckResult(("pytest", "-q"), 1, "FAILED test_parse - assert 2 == 3\n1 failed"),
        CheckResult(("sleep", "99"), None, "", timed_out=True),
    )
    changes = RunChanges("vigil/1-x", "b" * 40, ("bbbbbbb fix it", "ccccccc more"), 2, 10, 3, dirty=True)
    outcome = Outcome(OutcomeKind.CHECKS_FAILED, summary="check failed", checks=checks, changes=changes)
    await store.record(claimed, outcome, worker="w1")
    (run,) = await store.list_runs(claimed.task.id)
    assert (run.outcome, run.checks, run.changes, run.gated) == ("checks_failed", checks, changes, True)
    assert (await store.get_run(run.id)) == run


async def test_a_run_without_code_work_records_none(store: Store) -> None:
    await store.add_task(new("say hello"))
    claimed = await claim(store)
    await store.record(claimed, Outcome(OutcomeKind.SUCCESS), worker="w1")
    (run,) = await store.list_runs(claimed.task.id)
    assert (run.checks, run.changes, run.gated) == ((), None, False)


async def test_an_approval_that_merged_records_the_merge_in_the_audit_trail(store: Store) -> None:
    added = await store.add_task(new("fix the parser"))
    assert added.task_id is not None
    await store.set_worktree(added.task_id, WORKTREE)
    await store.record(await claim(store), Outcome(OutcomeKind.SUCCESS, review=True), worker="w1")
    merged = replace(WORKTREE, merge="squash", merged="d" * 40, merged_from="a" * 40)
    approved = await store.approve(added.task_id, actor="human", merged=merged)
    assert (approved.status, approved.review, approved.worktree) == (
        TaskStatus.COMPLETED,
        ApprovalState.APPROVED,
        merged,
    )
    events = [(e.actor, e.kind, e.from_value, e.to_value, e.detail) for e in await store.list_events(added.task_id)]
    assert ("human", "review", "pending", "approved", None) in events
    assert ("human", "merge", WORKTREE.branch, "d" * 40, "squash into main") in events


async def test_an_approval_without_a_merge_keeps_the_worktree_as_it_was(store: Store) -> None:
    added = await store.add_task(new("fix the parser"))
    assert added.task_id is not None
    await store.set_worktree(added.task_id, WORKTREE)
    await store.record(await claim(store), Outcome(OutcomeKind.SUCCESS, review=True), worker="w1")
    approved = await store.approve(added.task_id, actor="human")
    assert approved.worktree == WORKTREE
    assert "merge" not in [e.kind for e in await store.list_events(added.task_id)]
