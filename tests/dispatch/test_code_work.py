"""The loop on a real git repository, with a ``FakeExecutor`` standing in for the
agent (it edits and commits in the workspace it is given): the worktree, the run's
changes, checks that fail then pass, review and its merge, a follow-up's branch.
The real agent CLIs do the same in tests/agents/test_code_e2e.py."""

from __future__ import annotations

import asyncio
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.executors import RunContext
from dispatch.executors.fake import Handler
from dispatch.process import group_alive
from dispatch.workspace import with_gates
from tests.code.repos import Repo
from tests.dispatch.conftest import MakeDispatcher
from vigil.agent_channel import AgentChannel
from vigil.clock import ManualClock
from vigil.clones import make_clone
from vigil.codework import Check, CodeOptions
from vigil.config import Settings
from vigil.models import NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.review import approve, request_changes
from vigil.store.sqlite import SqliteStore

# passes when answer.txt says 42, and says what it found otherwise
CHECK = Check(
    (sys.executable, "-c", "import sys; t = open('answer.txt').read().strip(); print('found', t); sys.exit(t != '42')")
)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app", {"answer.txt": "0\n", "README.md": "app\n"})


def on_repo(settings: Settings, repo: Repo, **code: object) -> Settings:
    """The home's settings with every task on ``repo`` (and ``code``'s options)."""
    options = CodeOptions(repo=str(repo.path), **code)  # type: ignore[arg-type]
    return replace(settings, dispatch=replace(settings.dispatch, executor="command", code=options))


def writes(answer: str, *, commit: bool = True) -> Handler:
    """An agent that writes ``answer`` into answer.txt, and commits it (unless told)."""

    def handler(task: Task, ctx: RunContext) -> Outcome:
        assert ctx.workdir is not None
        work = Repo(ctx.workdir)
        work.write({"answer.txt": answer + "\n"})
        if commit:
            work.git("commit", "--quiet", "--all", "--allow-empty", "-m", f"answer {answer}")
        return Outcome(OutcomeKind.SUCCESS, summary=f"wrote {answer}")

    return handler


async def test_a_task_runs_in_its_own_worktree_and_its_run_records_the_changes(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo
) -> None:
    added = await db.add_task(NewTask("Answer the question"))
    dispatcher, fake = make_dispatcher(writes("42", commit=False), settings=on_repo(settings, repo))
    task = await dispatcher.run_once()
    assert task is not None
    assert task.status is TaskStatus.COMPLETED
    worktree = task.worktree
    assert worktree is not None
    assert (worktree.branch, worktree.base, worktree.merge) == (
        f"vigil/{added.task_id}-answer-the-question",
        "main",
        "branch",
    )
    ((_, ctx),) = fake.calls
    assert ctx.workdir == Path(worktree.path) == settings.home / "work" / str(added.task_id)
    assert ctx.writable_dirs == (Path(worktree.path) / ".git",)  # its own clone's, nothing of the repository's
    assert "git clone of" in ctx.prompt
    assert f"`{worktree.branch}`" in ctx.prompt
    (run,) = await db.list_runs(task.id)
    assert run.changes is not None
    assert (run.changes.dirty, len(run.changes.commits), run.changes.files) == (True, 1, 1)
    assert worktree.artifact is not None
    assert repo.show(worktree.artifact, "answer.txt") == "42"
    assert repo.git("rev-parse", f"refs/vigil/tasks/{task.id}") == worktree.artifact
    assert repo.show("main", "answer.txt") == "0"  # nothing merged without a review
    assert (repo.path / "answer.txt").read_text() == "0\n"


async def test_a_missing_repository_fails_the_task_before_the_agent_starts(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, tmp_path: Path
) -> None:
    await db.add_task(NewTask("Answer", code=CodeOptions(repo=str(tmp_path / "nowhere"))))
    dispatcher, fake = make_dispatcher(
        writes("42"), settings=replace(settings, dispatch=replace(settings.dispatch, executor="command"))
    )
    task = await dispatcher.run_once()
    assert task is not None
    assert fake.calls == []
    assert task.status is TaskStatus.FAILED
    assert task.result_summary == f"repository {tmp_path / 'nowhere'} does not exist"
    assert not (settings.home / "work" / str(task.id)).exists()


async def test_a_failing_check_retries_with_its_output_in_the_next_prompt_then_passes(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo
) -> None:
    await db.add_task(NewTask("Answer the question"))
    answers = iter(["41", "42"])

    def handler(task: Task, ctx: RunContext) -> Outcome:
        return writes(next(answers))(task, ctx)  # type: ignore[return-value]

    dispatcher, fake = make_dispatcher(handler, settings=on_repo(settings, repo, checks=(CHECK,)))
    first = await dispatcher.run_once()
    assert first is not None
    assert (first.status, first.attempt_count) == (TaskStatus.PENDING, 1)
    (run,) = await db.list_runs(first.id)
    assert run.outcome == "checks_failed"
    assert (run.checks[0].exit_code, run.checks[0].output) == (1, "found 41")
    second = await dispatcher.run_once()
    assert second is not None
    assert second.status is TaskStatus.COMPLETED
    prompt = fake.calls[1][1].prompt
    assert "failed (exit 1); its output ended with:" in prompt
    assert "found 41" in prompt
    assert "These checks must pass" in prompt
    runs = await db.list_runs(second.id)
    assert [r.outcome for r in runs] == ["checks_failed", "success"]
    assert runs[1].checks[0].passed
    assert fake.calls[0][1].workdir == fake.calls[1][1].workdir  # the retry reused the worktree


async def test_a_check_that_fails_on_the_last_attempt_fails_the_task(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo
) -> None:
    await db.add_task(NewTask("Answer", max_retries=0))
    dispatcher, _ = make_dispatcher(writes("7"), settings=on_repo(settings, repo, checks=(CHECK,)))
    task = await dispatcher.run_once()
    assert task is not None
    assert task.status is TaskStatus.FAILED
    assert task.result_summary is not None
    assert task.result_summary.startswith("gave up after 1 attempt: check failed:")


async def test_review_holds_a_passing_run_and_an_approval_merges_it(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo
) -> None:
    await db.add_task(NewTask("Answer the question"))
    dispatcher, _ = make_dispatcher(
        writes("42"), settings=on_repo(settings, repo, checks=(CHECK,), review=True, merge="squash")
    )
    held = await dispatcher.run_once()
    assert held is not None
    assert held.awaiting_review
    assert repo.show("main", "answer.txt") == "0"
    done = await approve(db, held.id, actor="human")
    assert done.merged is not None
    assert done.task.status is TaskStatus.COMPLETED
    assert repo.show("main", "answer.txt") == "42"
    assert (repo.path / "answer.txt").read_text() == "42\n"  # the person's checkout of main follows
    assert repo.log("main")[0] == "Answer the question"
    events = [(e.kind, e.to_value, e.detail) for e in await db.list_events(held.id)]
    assert ("merge", done.merged.commit, "squash into main") in events


async def test_a_conflict_on_approval_goes_back_to_the_agent_with_the_conflict_in_its_prompt(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo
) -> None:
    await db.add_task(NewTask("Answer the question"))
    dispatcher, fake = make_dispatcher(writes("42"), settings=on_repo(settings, repo, review=True, merge="merge"))
    held = await dispatcher.run_once()
    assert held is not None
    repo.commit({"answer.txt": "43\n"}, "a person answers too")
    back = await approve(db, held.id, actor="human")
    assert back.conflict is not None
    assert back.conflict.files == ("answer.txt",)
    assert back.task.status is TaskStatus.PENDING
    assert repo.show("main", "answer.txt") == "43"
    await dispatcher.run_once()
    prompt = fake.calls[1][1].prompt
    assert "merge conflict: merging your branch into main" in prompt
    assert "conflicts in: answer.txt" in prompt


async def test_requested_changes_are_in_front_of_the_agent(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo
) -> None:
    await db.add_task(NewTask("Answer the question"))
    dispatcher, fake = make_dispatcher(writes("42"), settings=on_repo(settings, repo, review=True))
    held = await dispatcher.run_once()
    assert held is not None
    back = await request_changes(db, held.id, "Say why it is 42 in a comment", actor="human")
    assert back.status is TaskStatus.PENDING
    again = await dispatcher.run_once()
    assert again is not None
    assert again.awaiting_review
    assert "Say why it is 42 in a comment" in fake.calls[1][1].prompt
    assert fake.calls[1][1].workdir == fake.calls[0][1].workdir


async def test_a_follow_up_branches_from_its_parents_branch(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo, clock: ManualClock
) -> None:
    added = await db.add_task(NewTask("Answer the question"))
    assert added.task_id is not None

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        if task.parent_id is None:
            writes("42")(task, ctx)
            channel = AgentChannel(db, ctx.run_id, settings, clock)
            await channel.add_followup("Explain the answer")
            return Outcome(OutcomeKind.SUCCESS)
        assert ctx.workdir is not None
        assert (ctx.workdir / "answer.txt").read_text() == "42\n"  # the parent's work is there
        return writes("42, because")(task, ctx)  # type: ignore[return-value]

    dispatcher, _ = make_dispatcher(handler, settings=on_repo(settings, repo))
    parent = await dispatcher.run_once()
    child = await dispatcher.run_once()
    assert parent is not None
    assert child is not None
    assert (child.parent_id, child.status) == (parent.id, TaskStatus.COMPLETED)
    assert parent.worktree is not None
    assert child.worktree is not None
    assert child.worktree.branch != parent.worktree.branch
    assert child.worktree.start == parent.worktree.artifact
    assert child.worktree.base == "main"


async def test_an_agents_follow_up_inherits_its_parents_gates(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo, clock: ManualClock
) -> None:
    """The parent had a repository, checks, review and squash; the follow-up its
    agent adds asks for none of it, and gets all of it all the same."""
    gates = CodeOptions(repo=str(repo.path), checks=(CHECK,), review=True, merge="squash")
    await db.add_task(NewTask("Answer the question", code=gates))

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        if task.parent_id is None:
            writes("42")(task, ctx)
            channel = AgentChannel(db, ctx.run_id, settings, clock)
            await channel.add_followup("Also answer 43")
            return Outcome(OutcomeKind.SUCCESS)
        return writes("43")(task, ctx)  # type: ignore[return-value]

    command = replace(settings, dispatch=replace(settings.dispatch, executor="command"))
    dispatcher, _ = make_dispatcher(handler, settings=command)
    parent = await dispatcher.run_once()
    child = await dispatcher.run_once()
    assert parent is not None
    assert child is not None
    assert parent.awaiting_review
    assert child.parent_id == parent.id
    (run,) = await db.list_runs(child.id)
    assert [c.exit_code for c in run.checks] == [1]  # the parent's check ran on it: 43 is not 42
    assert child.worktree is not None
    assert (child.worktree.repo, child.worktree.merge) == (str(repo.path), "squash")


async def test_the_agents_close_as_completed_does_not_skip_the_checks(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo, clock: ManualClock
) -> None:
    await db.add_task(NewTask("Answer", max_retries=0))

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        # as an agent CLI's executor does: the run's process is recorded before the
        # agent can call a tool (a pid no process has: nothing will signal it)
        await ctx.on_process_start(2**22 + 1, 2**22 + 1, None)
        writes("41")(task, ctx)
        answer = await AgentChannel(db, ctx.run_id, settings, clock).close("completed", "all done")
        assert "is not closed by you" in answer
        return Outcome(OutcomeKind.SUCCESS)

    dispatcher, _ = make_dispatcher(handler, settings=on_repo(settings, repo, checks=(CHECK,)))
    task = await dispatcher.run_once()
    assert task is not None
    assert task.status is TaskStatus.FAILED
    assert [(n.author, n.text) for n in await db.list_notes(task.id)] == [("agent", "done: all done")]


async def test_two_lanes_on_one_repository_work_in_two_worktrees_at_once(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo
) -> None:
    await db.add_task(NewTask("first"))
    await db.add_task(NewTask("second"))
    both_in = asyncio.Barrier(2)
    seen: dict[str, list[str]] = {}

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        assert ctx.workdir is not None
        Repo(ctx.workdir).write({f"{task.subject}.txt": task.subject})
        await both_in.wait()  # both agents are at work, each has written its file
        seen[task.subject] = sorted(p.name for p in ctx.workdir.iterdir() if p.name.endswith(".txt"))
        return Outcome(OutcomeKind.SUCCESS)

    on = on_repo(settings, repo)
    one, _ = make_dispatcher(handler, settings=on)
    two, _ = make_dispatcher(handler, settings=on)
    two.worker_id = "test-host:2:def"
    done = await asyncio.wait_for(asyncio.gather(one.run_once(), two.run_once()), 60)
    assert {t.status for t in done if t is not None} == {TaskStatus.COMPLETED}
    assert seen == {"first": ["answer.txt", "first.txt"], "second": ["answer.txt", "second.txt"]}
    paths = {t.worktree.path for t in done if t is not None and t.worktree is not None}
    assert len(paths) == 2


async def test_checks_run_watched_a_cancel_ends_them_and_the_run_keeps_its_changes(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo
) -> None:
    """A check runs under the heartbeat like the agent: the lease is renewed, and a
    person's cancel ends it (its process group) and the task."""
    slow = Check((sys.executable, "-c", "import time; open('check-started', 'w').close(); time.sleep(60)"))
    added = await db.add_task(NewTask("Answer"))
    assert added.task_id is not None
    started = settings.home / "work" / str(added.task_id) / "check-started"  # in the workspace: the check writes there
    dispatcher, _ = make_dispatcher(writes("42", commit=False), settings=on_repo(settings, repo, checks=(slow,)))
    running = asyncio.ensure_future(dispatcher.run_once())
    for _ in range(600):
        if started.exists():
            break
        await asyncio.sleep(0.05)
    assert started.exists()
    await db.cancel(added.task_id, actor="human")
    task = await asyncio.wait_for(running, 60)
    assert task is not None
    assert task.status is TaskStatus.CANCELED
    (run,) = await db.list_runs(task.id)
    assert run.outcome == "canceled"
    assert run.changes is not None
    assert run.changes.dirty  # what the agent left is on the branch all the same
    assert run.pid is not None
    assert not group_alive(run.pid)  # the check's group, recorded on the run, is gone


def test_a_follow_ups_own_options_cannot_weaken_its_parents_gates() -> None:
    gates = CodeOptions(repo="/srv/app", base="main", checks=(CHECK,), review=True, merge="squash")
    weaker = CodeOptions(repo="/elsewhere", base="other", checks=(Check(("true",)),), review=False, merge="branch")
    held = with_gates(weaker, gates)
    assert (held.repo, held.base, held.review, held.merge) == ("/srv/app", "main", True, "squash")
    assert held.checks == (CHECK, Check(("true",)))  # the parent's first, its own may only add


async def test_a_follow_up_of_a_task_that_needed_approval_needs_it_too(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, clock: ManualClock
) -> None:
    added = await db.add_task(NewTask("Delete old data", requires_approval=True))
    assert added.task_id is not None
    await db.approve(added.task_id, actor="human")

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        await AgentChannel(db, ctx.run_id, settings, clock).add_followup("Delete the rest too")
        return Outcome(OutcomeKind.SUCCESS)

    command = replace(settings, dispatch=replace(settings.dispatch, executor="command"))
    dispatcher, _ = make_dispatcher(handler, settings=command)
    await dispatcher.run_once()
    (child,) = [t for t in await db.list_tasks() if t.parent_id == added.task_id]
    assert child.awaiting_approval


async def test_a_repository_deleted_during_the_run_fails_the_task(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo
) -> None:
    await db.add_task(NewTask("Answer the question"))

    def handler(task: Task, ctx: RunContext) -> Outcome:
        writes("42")(task, ctx)
        shutil.rmtree(repo.path)  # gone while the agent worked
        return Outcome(OutcomeKind.SUCCESS, summary="wrote 42")

    dispatcher, _ = make_dispatcher(handler, settings=on_repo(settings, repo))
    task = await dispatcher.run_once()
    assert task is not None
    assert task.status is TaskStatus.FAILED
    assert task.result_summary is not None
    assert task.result_summary.startswith("the repository is gone: ")


async def test_what_an_attempt_cut_short_left_in_its_clone_is_taken_before_the_next(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, repo: Repo
) -> None:
    """A dispatcher that died mid-run never took the clone's work out; the next
    attempt takes it first, then starts from it."""
    added = await db.add_task(NewTask("Answer the question"))
    assert added.task_id is not None
    made = make_clone(
        repo.path, settings.home / "work" / str(added.task_id), task_id=added.task_id, subject="a", base=None
    )
    await db.set_worktree(added.task_id, made)
    repo.commit({"answer.txt": "41\n"}, "half done", at=Path(made.path))  # then the dispatcher died
    seen: list[str] = []

    def handler(task: Task, ctx: RunContext) -> Outcome:
        assert ctx.workdir is not None
        seen.append((ctx.workdir / "answer.txt").read_text())
        return writes("42")(task, ctx)  # type: ignore[return-value]

    dispatcher, _ = make_dispatcher(handler, settings=on_repo(settings, repo))
    task = await dispatcher.run_once()
    assert task is not None
    assert seen == ["41\n"]
    assert task.worktree is not None
    assert task.worktree.artifact is not None
    assert repo.log(task.worktree.artifact)[:2] == ["answer 42", "half done"]
