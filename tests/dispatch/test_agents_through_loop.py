"""The fake Claude Code and Codex scenarios through the real dispatcher and store: each
ends in the right task state and run record (retry, requeue after a reset, or final)."""

from __future__ import annotations

import json
import random
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from dispatch.executors import build_executor
from dispatch.loop import Dispatcher
from tests.dispatch.agent_support import CLAUDE_FAKE, CODEX_FAKE, PRICES, fake_argv
from tests.dispatch.conftest import WORKER
from tests.dispatch.permissive import Permissive
from vigil.clock import ManualClock
from vigil.config import AgentCliSettings, Price, Settings
from vigil.models import NewTask, Task, TaskStatus
from vigil.store.sqlite import SqliteStore

NOW_MS = 1_767_100_000_000  # before the fakes' reset time (2026-01-01T00:00:00Z)
RESET_MS = 1_767_225_600_000


async def run_scenario(
    db: SqliteStore, settings: Settings, clock: ManualClock, scenario: str, *, executor: str = "claude"
) -> tuple[Task, list[dict[str, object]]]:
    clock.set(NOW_MS)
    settings = replace(
        settings,
        dispatch=replace(settings.dispatch, executor=executor),
        claude=AgentCliSettings(tuple(fake_argv(CLAUDE_FAKE, scenario))),
        codex=AgentCliSettings(tuple(fake_argv(CODEX_FAKE, scenario)), model="gpt-5-codex"),
        prices={name: Price(**price) for name, price in PRICES.items()},
    )
    added = await db.add_task(NewTask(f"scenario {scenario}"))
    assert added.task_id is not None
    dispatcher = Dispatcher(
        db,
        settings,
        lambda name: build_executor(name, settings, grace_s=0.5),
        clock,
        WORKER,
        guard=Permissive(),
        rng=random.Random(1),
    )
    task = await dispatcher.run_once()
    assert task is not None
    return task, [asdict(run) for run in await db.list_runs(added.task_id)]


async def test_success_records_cost_tokens_and_transcript(
    db: SqliteStore, settings: Settings, clock: ManualClock
) -> None:
    task, (run,) = await run_scenario(db, settings, clock, "success")
    assert task.status is TaskStatus.COMPLETED
    assert task.cost_usd == pytest.approx(0.032543)
    assert task.tokens_in == 304
    assert task.tokens_out == 151
    assert task.api_cost_usd > 0
    assert task.result_summary == "Done: the inbox is triaged. Three items closed."
    assert task.model == "claude-opus-4-6"
    assert run["outcome"] == "success"
    assert run["cache_read_tokens"] == 38821
    assert run["cache_write_tokens"] == 1794
    assert run["session_id"] == "f9356e8d-5c2b-4a11-9d0b-7f3c2e1a0b9c"
    assert run["pid"] is not None
    assert run["pgid"] == run["pid"]
    assert run["proc_start"] is not None
    transcript = Path(str(run["transcript_path"]))
    assert json.loads(transcript.read_text().splitlines()[-2])["type"] == "result"


async def test_overload_is_retried_with_backoff(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    task, (run,) = await run_scenario(db, settings, clock, "overloaded")
    assert task.status is TaskStatus.PENDING
    assert task.attempt_count == 1
    assert task.scheduled_for > NOW_MS
    assert run["outcome"] == "transient"


async def test_auth_failure_gives_the_task_back(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    task, (run,) = await run_scenario(db, settings, clock, "auth")
    assert task.status is TaskStatus.PENDING
    assert task.attempt_count == 0
    assert run["outcome"] == "auth"
    # stopped at the first retry of the refused key, not after the CLI's minutes of retries
    assert "HTTP 401" in str(run["error"])


@pytest.mark.parametrize("scenario", ["usage_limit", "usage_limit_old"])
async def test_usage_limit_requeues_without_counting_and_the_run_names_the_reset(
    db: SqliteStore, settings: Settings, clock: ManualClock, scenario: str
) -> None:
    task, (run,) = await run_scenario(db, settings, clock, scenario)
    assert task.status is TaskStatus.PENDING
    assert task.scheduled_for == NOW_MS  # due at once: the account waits for the reset, not the task
    assert "usage limit" in str(run["error"])
    assert task.attempt_count == 0
    assert run["outcome"] == "usage_limited"


@pytest.mark.parametrize(("scenario", "outcome"), [("max_turns", "turns"), ("budget", "budget")])
async def test_turns_and_budget_fail(
    db: SqliteStore, settings: Settings, clock: ManualClock, scenario: str, outcome: str
) -> None:
    task, (run,) = await run_scenario(db, settings, clock, scenario)
    assert task.status is TaskStatus.FAILED
    assert run["outcome"] == outcome
    assert task.tokens_in == 304


async def test_crash_is_retried(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    task, (run,) = await run_scenario(db, settings, clock, "crash")
    assert task.status is TaskStatus.PENDING
    assert run["outcome"] == "transient"
    assert run["exit_code"] == 1


async def test_noise_completes(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    task, _ = await run_scenario(db, settings, clock, "noise")
    assert task.status is TaskStatus.COMPLETED


async def test_a_10_mb_answer_is_stored_capped(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    task, (run,) = await run_scenario(db, settings, clock, "big")
    assert task.status is TaskStatus.COMPLETED
    assert task.result_detail is not None
    assert len(task.result_detail) < 70_000
    assert task.result_summary is not None
    assert len(task.result_summary) <= 200
    transcript = Path(str(run["transcript_path"]))
    assert transcript.stat().st_size > 20 * 1024 * 1024  # assistant line and result line, both whole


async def test_codex_success_over_two_turns(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    task, (run,) = await run_scenario(db, settings, clock, "success", executor="codex")
    assert task.status is TaskStatus.COMPLETED
    assert task.result_summary == "Final: all three feeds summarised."
    assert task.tokens_in == (37067 - 26880) + (1000 - 500)
    assert task.tokens_out == 1000
    assert run["cache_read_tokens"] == 26880 + 500
    assert task.api_cost_usd == pytest.approx(task.cost_usd)
    assert task.cost_usd > 0
    assert run["model"] == "gpt-5-codex"
    assert run["session_id"] == "01a03463"


async def test_codex_turn_failed_is_retried(db: SqliteStore, settings: Settings, clock: ManualClock) -> None:
    task, (run,) = await run_scenario(db, settings, clock, "turn_failed", executor="codex")
    assert task.status is TaskStatus.PENDING
    assert task.scheduled_for > NOW_MS
    assert run["outcome"] == "transient"
    assert run["error"] == "stream disconnected before completion"
