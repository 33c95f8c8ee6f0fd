"""``Dispatcher.run_once``: claim → run → record, with a FakeExecutor on a real store."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dispatch.executors import RunContext
from dispatch.executors.dryrun import DryRunExecutor
from dispatch.executors.fake import Handler
from dispatch.loop import Dispatcher
from tests.dispatch.conftest import WORKER, MakeDispatcher, write_skill
from tests.dispatch.permissive import Permissive
from vigil.clock import ManualClock
from vigil.config import Settings
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat, NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store.sqlite import SqliteStore


def returning(outcome: Outcome) -> Handler:
    return lambda task, ctx: outcome


async def test_nothing_due_returns_none(db: SqliteStore, make_dispatcher: MakeDispatcher, clock: ManualClock) -> None:
    await db.add_task(NewTask("later", scheduled_for=clock.now_ms() + 60_000))
    dispatcher, fake = make_dispatcher(returning(Outcome(OutcomeKind.SUCCESS)))

    assert await dispatcher.run_once() is None
    assert fake.calls == []


async def test_success_completes_the_task_and_records_the_run(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings
) -> None:
    added = await db.add_task(NewTask("write the report", description="about X"))
    outcome = Outcome(
        OutcomeKind.SUCCESS,
        summary="report written",
        detail="the whole answer",
        exit_code=0,
        cost_usd=0.25,
        tokens_in=100,
        tokens_out=20,
        cache_read_tokens=5,
        model="m1",
        session_id="s1",
    )
    names: list[str] = []
    dispatcher, fake = make_dispatcher(returning(outcome), names=names)

    task = await dispatcher.run_once()

    assert task is not None
    assert task.id == added.task_id
    assert task.status is TaskStatus.COMPLETED
    assert (task.result_summary, task.result_detail) == ("report written", "the whole answer")
    assert (task.cost_usd, task.tokens_in, task.tokens_out, task.model) == (0.25, 100, 20, "m1")
    assert task.claimed_by is None
    (run,) = await db.list_runs(task.id)
    assert (run.outcome, run.exit_code, run.cost_usd, run.cache_read_tokens, run.session_id) == (
        "success",
        0,
        0.25,
        5,
        "s1",
    )
    assert run.claimed_by == WORKER
    assert names == [settings.dispatch.executor]
    (called_task, ctx) = fake.calls[0]
    assert called_task.id == task.id
    assert "write the report" in ctx.prompt
    assert "about X" in ctx.prompt


async def test_run_context_is_filled_from_task_skill_and_config(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, home: Path
) -> None:
    write_skill(
        home,
        "checker",
        'description: Checks things.\nexecutor: command\ntimeout: 90s\nmodel: tiny\ncommand: ["./check.py", "--all"]',
        body="Check every thing.",
    )
    added = await db.add_task(NewTask("check", skills=("checker",)))
    names: list[str] = []
    dispatcher, fake = make_dispatcher(returning(Outcome(OutcomeKind.SUCCESS)), names=names)

    await dispatcher.run_once()

    (_, ctx) = fake.calls[0]
    (run,) = await db.list_runs(added.task_id or 0)
    assert names == ["command"]
    assert ctx.timeout_s == 90
    assert ctx.model == "tiny"
    assert ctx.command == (str(home / "skills" / "checker" / "check.py"), "--all")
    assert ctx.transcript_path == settings.logs_dir / "runs" / f"{added.task_id}-1.jsonl"
    assert ctx.transcript_path.parent.is_dir()
    assert (ctx.run_id, ctx.attempt, ctx.home) == (run.id, 1, settings.home)
    assert ctx.env["VIGIL_TASK_ID"] == str(added.task_id)
    assert ctx.env["VIGIL_RUN_ID"] == str(run.id)
    assert ctx.env["VIGIL_HOME"] == str(settings.home)
    assert "Check every thing." in ctx.prompt


async def test_timeout_defaults_to_the_configured_one(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings
) -> None:
    await db.add_task(NewTask("t"))
    dispatcher, fake = make_dispatcher(returning(Outcome(OutcomeKind.SUCCESS)))

    await dispatcher.run_once()

    assert fake.calls[0][1].timeout_s == settings.dispatch.timeout_ms / 1000
    assert fake.calls[0][1].command is None


async def test_process_start_is_recorded_on_the_run(db: SqliteStore, make_dispatcher: MakeDispatcher) -> None:
    await db.add_task(NewTask("t"))

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        await ctx.on_process_start(4321, 4321, "987654")
        return Outcome(OutcomeKind.SUCCESS)

    dispatcher, _ = make_dispatcher(handler)
    task = await dispatcher.run_once()

    assert task is not None
    (run,) = await db.list_runs(task.id)
    assert (run.pid, run.pgid, run.proc_start) == (4321, 4321, "987654")


async def test_the_executor_a_skill_chooses_is_stored_while_it_runs_and_after(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, home: Path
) -> None:
    assert settings.dispatch.executor != "command"
    write_skill(home, "checker", 'description: Checks.\ncommand: ["./check.py"]')
    added = await db.add_task(NewTask("check", skills=("checker",)))
    seen: list[str | None] = []

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        seen.append((await db.get_task(task.id)).executor)  # what the TUI shows while it runs
        return Outcome(OutcomeKind.SUCCESS)

    dispatcher, _ = make_dispatcher(handler)
    task = await dispatcher.run_once()

    assert task is not None
    (run,) = await db.list_runs(added.task_id or 0)
    assert seen == ["command"]
    assert (task.executor, run.executor) == ("command", "command")
    assert (await db.get_task(task.id)).executor == "command"


async def test_failure_fails_without_a_retry(db: SqliteStore, make_dispatcher: MakeDispatcher) -> None:
    await db.add_task(NewTask("t"))
    dispatcher, _ = make_dispatcher(returning(Outcome(OutcomeKind.FAILED, summary="cannot be done", error="no")))

    task = await dispatcher.run_once()

    assert task is not None
    assert task.status is TaskStatus.FAILED
    assert task.result_summary == "cannot be done"
    assert await dispatcher.run_once() is None
    assert [r.outcome for r in await db.list_runs(task.id)] == ["failed"]


async def test_an_auth_failure_gives_the_task_back_uncounted(db: SqliteStore, make_dispatcher: MakeDispatcher) -> None:
    await db.add_task(NewTask("t"))
    dispatcher, _ = make_dispatcher(returning(Outcome(OutcomeKind.AUTH, summary="not logged in", error="401")))

    task = await dispatcher.run_once()

    assert task is not None
    assert task.status is TaskStatus.PENDING
    assert task.attempt_count == 0
    assert [r.outcome for r in await db.list_runs(task.id)] == ["auth"]


async def test_transient_failure_is_retried_after_backoff_with_the_history_in_the_prompt(
    db: SqliteStore, make_dispatcher: MakeDispatcher, clock: ManualClock
) -> None:
    await db.add_task(NewTask("t"))
    outcomes = [
        Outcome(OutcomeKind.TRANSIENT, summary="overloaded", error="API 529 overloaded (first try)"),
        Outcome(OutcomeKind.SUCCESS, summary="done"),
    ]
    dispatcher, fake = make_dispatcher(lambda task, ctx: outcomes.pop(0))
    start = clock.now_ms()

    first = await dispatcher.run_once()

    assert first is not None
    assert first.status is TaskStatus.PENDING
    assert first.attempt_count == 1
    # retry 1: retry_backoff (10 s) with equal jitter → between 5 s and 10 s from now
    assert start + 5_000 <= first.scheduled_for < start + 10_000
    assert await dispatcher.run_once() is None  # not due yet

    clock.set(first.scheduled_for)
    second = await dispatcher.run_once()

    assert second is not None
    assert second.status is TaskStatus.COMPLETED
    assert second.attempt_count == 2
    assert [(r.attempt, r.outcome) for r in await db.list_runs(second.id)] == [(1, "transient"), (2, "success")]
    retry_prompt = fake.calls[1][1].prompt
    assert "API 529 overloaded (first try)" in retry_prompt
    assert fake.calls[1][1].attempt == 2


async def test_backoff_grows_and_retries_end_in_failure(
    db: SqliteStore, make_dispatcher: MakeDispatcher, clock: ManualClock
) -> None:
    await db.add_task(NewTask("t", max_retries=2))
    dispatcher, _ = make_dispatcher(returning(Outcome(OutcomeKind.TIMEOUT, error="timed out after 600s")))
    delays = []
    task: Task | None = None
    for _ in range(2):
        now = clock.now_ms()
        task = await dispatcher.run_once()
        assert task is not None
        assert task.status is TaskStatus.PENDING
        delays.append(task.scheduled_for - now)
        clock.set(task.scheduled_for)

    final = await dispatcher.run_once()

    assert 5_000 <= delays[0] < 10_000
    assert 10_000 <= delays[1] < 20_000
    assert final is not None
    assert final.status is TaskStatus.FAILED
    assert final.attempt_count == 3
    assert final.result_summary == "gave up after 3 attempts: timed out after 600s"
    assert len(await db.list_runs(final.id)) == 3


async def test_usage_limit_requeues_due_now_without_counting_the_attempt(
    db: SqliteStore, make_dispatcher: MakeDispatcher, clock: ManualClock
) -> None:
    await db.add_task(NewTask("t", max_retries=0))
    reset = clock.now_ms() + 2 * 3_600_000
    dispatcher, _ = make_dispatcher(returning(Outcome(OutcomeKind.USAGE_LIMITED, error="limit", retry_at=reset)))

    task = await dispatcher.run_once()

    assert task is not None
    assert task.status is TaskStatus.PENDING
    # the limit stops the account until its reset (the guard's work), not the task
    assert task.scheduled_for == clock.now_ms()
    assert task.attempt_count == 0
    (run,) = await db.list_runs(task.id)
    assert run.outcome == "usage_limited"


async def test_unknown_skill_fails_the_task_clearly_and_the_loop_goes_on(
    db: SqliteStore, make_dispatcher: MakeDispatcher
) -> None:
    bad = await db.add_task(NewTask("needs a skill", skills=("no-such-skill",), priority=1))
    good = await db.add_task(NewTask("plain", priority=2))
    dispatcher, fake = make_dispatcher(returning(Outcome(OutcomeKind.SUCCESS)))

    first = await dispatcher.run_once()
    second = await dispatcher.run_once()

    assert first is not None
    assert first.id == bad.task_id
    assert first.status is TaskStatus.FAILED
    assert first.result_summary is not None
    assert "unknown skill 'no-such-skill'" in first.result_summary
    assert second is not None
    assert (second.id, second.status) == (good.task_id, TaskStatus.COMPLETED)
    assert [t.id for t, _ in fake.calls] == [good.task_id]


async def test_invalid_skill_name_fails_the_task(db: SqliteStore, make_dispatcher: MakeDispatcher) -> None:
    await db.add_task(NewTask("t", skills=("../etc",)))
    dispatcher, fake = make_dispatcher(returning(Outcome(OutcomeKind.SUCCESS)))

    task = await dispatcher.run_once()

    assert task is not None
    assert task.status is TaskStatus.FAILED
    assert "invalid skill name" in (task.result_summary or "")
    assert fake.calls == []


def _crashes_at_once(task: Task, ctx: RunContext) -> Outcome:
    raise RuntimeError("parser blew up")


async def _crashes_after_a_wait(task: Task, ctx: RunContext) -> Outcome:
    await asyncio.sleep(0.01)
    raise RuntimeError("parser blew up")


@pytest.mark.parametrize("handler", [_crashes_at_once, _crashes_after_a_wait], ids=["at-once", "after-a-wait"])
async def test_an_executor_crash_is_recorded_as_transient_and_retried(
    db: SqliteStore, make_dispatcher: MakeDispatcher, handler: Handler
) -> None:
    """A crash before the executor's first wait and one after it are the same
    transient outcome."""
    await db.add_task(NewTask("t"))
    dispatcher, _ = make_dispatcher(handler)

    task = await dispatcher.run_once()

    assert task is not None
    assert task.status is TaskStatus.PENDING
    (run,) = await db.list_runs(task.id)
    assert run.outcome == "transient"
    assert run.error == "executor crashed: RuntimeError: parser blew up"


async def test_the_agent_closing_its_own_task_keeps_that_status(
    db: SqliteStore, make_dispatcher: MakeDispatcher
) -> None:
    """End to end: the fake agent runs the real `vigil task close` with the run's environment."""
    await db.add_task(NewTask("t"))

    async def agent(task: Task, ctx: RunContext) -> Outcome:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "vigil",
            "task",
            "close",
            ctx.env["VIGIL_TASK_ID"],
            "--status",
            "blocked",
            "--summary",
            "needs a person to approve the spend",
            env=dict(ctx.env),
        )
        assert await proc.wait() == 0
        return Outcome(OutcomeKind.SUCCESS, summary="my final answer", cost_usd=0.5)

    dispatcher, _ = make_dispatcher(agent)

    task = await dispatcher.run_once()

    assert task is not None
    assert task.status is TaskStatus.BLOCKED
    assert task.result_summary == "needs a person to approve the spend"
    assert task.claimed_by is None
    assert task.cost_usd == 0.5
    (run,) = await db.list_runs(task.id)
    assert run.outcome == "success"
    events = [(e.actor, e.to_value) for e in await db.list_events(task.id) if e.kind == "status"]
    assert events == [("dispatcher", "active"), ("agent", "blocked")]


async def test_a_cancel_request_ends_the_running_executor(db: SqliteStore, make_dispatcher: MakeDispatcher) -> None:
    added = await db.add_task(NewTask("long"))
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Outcome(OutcomeKind.SUCCESS)

    dispatcher, _ = make_dispatcher(handler)
    running = asyncio.create_task(dispatcher.run_once())
    await asyncio.wait_for(started.wait(), 10)

    await db.cancel(added.task_id or 0, actor="human")
    task = await asyncio.wait_for(running, 10)

    assert cancelled.is_set()
    assert task is not None
    assert task.status is TaskStatus.CANCELED
    (run,) = await db.list_runs(task.id)
    assert run.outcome == "canceled"


async def test_heartbeat_renews_the_lease_and_says_what_runs(
    db: SqliteStore, make_dispatcher: MakeDispatcher, clock: ManualClock, settings: Settings
) -> None:
    added = await db.add_task(NewTask("t"))
    seen: list[tuple[int | None, DispatcherHeartbeat | None]] = []

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        clock.advance(30_000)
        await asyncio.sleep(0.3)  # several 50 ms heartbeats
        current = await db.get_task(task.id)
        beat = DispatcherHeartbeat.from_json((await db.loop_values()).get(HEARTBEAT_KEY))
        seen.append((current.lease_until, beat))
        return Outcome(OutcomeKind.SUCCESS)

    dispatcher, _ = make_dispatcher(handler)
    claimed_at = clock.now_ms()
    await dispatcher.run_once()

    ((lease_until, beat),) = seen
    assert lease_until == claimed_at + 30_000 + settings.dispatch.lease_ms
    assert beat is not None
    assert (beat.state, beat.task_id, beat.owner) == ("running", added.task_id, WORKER)
    assert beat.task_started_at == claimed_at
    assert beat.heartbeat_at == claimed_at + 30_000


def transcripts_folder_is_a_file(settings: Settings) -> str:
    settings.logs_dir.mkdir(exist_ok=True)
    (settings.logs_dir / "runs").write_text("a file where the transcripts folder should be")
    return "could not prepare the run: [Errno 17] File exists"


def identity_is_not_text(settings: Settings) -> str:
    identity = settings.home / settings.dispatch.identity
    identity.write_bytes(b"caf\xe9, written as latin-1\n")
    return f"could not prepare the run: {identity} is not UTF-8 text (byte 3)"


@pytest.mark.parametrize("break_the_home", [transcripts_folder_is_a_file, identity_is_not_text])
async def test_a_run_that_cannot_be_prepared_is_retried_not_fatal(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, break_the_home: Callable[[Settings], str]
) -> None:
    """The machine's fault, not the task's: the attempt is a transient failure,
    retried, and the executor never starts."""
    expected_error = break_the_home(settings)
    await db.add_task(NewTask("t"))
    dispatcher, fake = make_dispatcher(returning(Outcome(OutcomeKind.SUCCESS)))

    task = await dispatcher.run_once()

    assert task is not None
    assert task.status is TaskStatus.PENDING
    assert fake.calls == []
    (run,) = await db.list_runs(task.id)
    assert run.outcome == "transient"
    assert (run.error or "").startswith(expected_error)


async def test_each_prompt_has_the_identity_file_as_it_is_at_the_claim(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings
) -> None:
    """The identity file is read once per change, not per task; edits and removal
    still reach the very next task."""
    identity = settings.home / settings.dispatch.identity
    prompts: list[str] = []

    def record_prompt(task: Task, ctx: RunContext) -> Outcome:
        prompts.append(ctx.prompt)
        return Outcome(OutcomeKind.SUCCESS)

    dispatcher, _ = make_dispatcher(record_prompt)
    for text in ("You are the first agent.", "You are the second agent.", None):
        if text is None:
            identity.unlink()
        else:
            identity.write_text(text, encoding="utf-8")
            stat = identity.stat()  # a later edit: its time moves on even on a coarse clock
            os.utime(identity, ns=(stat.st_atime_ns, stat.st_mtime_ns + len(prompts) * 1_000_000_000))
        await db.add_task(NewTask(f"task {len(prompts)}"))
        await dispatcher.run_once()

    assert "You are the first agent." in prompts[0]
    assert "You are the second agent." in prompts[1]
    assert "first agent" not in prompts[1]
    assert "# Who you are" not in prompts[2]


async def test_a_transcripts_folder_removed_between_tasks_is_made_again(
    db: SqliteStore, settings: Settings, clock: ManualClock
) -> None:
    """The dispatcher makes logs/runs once; the executor that writes a transcript
    makes it again when someone removed it meanwhile."""
    dispatcher = Dispatcher(db, settings, lambda name: DryRunExecutor(), clock, WORKER, guard=Permissive())
    await db.add_task(NewTask("first"))
    first = await dispatcher.run_once()
    runs = settings.logs_dir / "runs"
    shutil.rmtree(runs)

    await db.add_task(NewTask("second"))
    second = await dispatcher.run_once()

    assert first is not None
    assert second is not None
    assert second.status is TaskStatus.COMPLETED
    assert (runs / f"{second.id}-1.jsonl").exists()


async def test_an_executor_that_waits_several_times_returns_its_own_outcome(
    db: SqliteStore, make_dispatcher: MakeDispatcher
) -> None:
    await db.add_task(NewTask("t"))
    steps: list[int] = []

    async def handler(task: Task, ctx: RunContext) -> Outcome:
        for step in range(3):
            steps.append(step)
            await asyncio.sleep(0)
            await asyncio.sleep(0.005)
        return Outcome(OutcomeKind.SUCCESS, summary="three waits")

    dispatcher, _ = make_dispatcher(handler)

    task = await dispatcher.run_once()

    assert task is not None
    assert (task.status, task.result_summary, steps) == (TaskStatus.COMPLETED, "three waits", [0, 1, 2])
