"""Helpers for testing executors directly (without the loop): tasks, settings that
point at the fake agent CLIs, run contexts that record process starts."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dispatch.environment import agent_env
from dispatch.executors import RunContext
from vigil.config import Settings, settings_from_mapping
from vigil.models import DedupScope, Task, TaskStatus

REPO = Path(__file__).resolve().parents[2]
FAKES = REPO / "tests" / "fakes"
CLAUDE_FAKE = FAKES / "claude_fake.py"
CODEX_FAKE = FAKES / "codex_fake.py"
PRICES = {
    "claude-opus-4-6": {"input": 5.0, "output": 25.0, "cache_read": 0.5, "cache_write": 6.25},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_read": 0.1, "cache_write": 1.25},
    "gpt-5-codex": {"input": 1.25, "output": 10.0, "cache_read": 0.125},
}

BASE_TASK = Task(
    id=7,
    subject="Triage the inbox",
    description="Three new files arrived.",
    skills=(),
    priority=3,
    status=TaskStatus.ACTIVE,
    source="human",
    source_key=None,
    dedup=DedupScope.OPEN,
    parent_id=None,
    scheduled_for=0,
    created_at=0,
    updated_at=0,
    started_at=0,
    completed_at=None,
    attempt_count=0,
    max_retries=3,
    cost_usd=0.0,
    api_cost_usd=0.0,
    tokens_in=0,
    tokens_out=0,
    result_summary=None,
    result_detail=None,
    model=None,
    executor=None,
    claimed_by=None,
    lease_until=None,
    cancel_requested=False,
    waiting_on=0,
)


def make_task(**overrides: Any) -> Task:
    return replace(BASE_TASK, **overrides)


def fake_argv(fake: Path, scenario: str, *options: str) -> list[str]:
    return [sys.executable, str(fake), scenario, *options]


def agent_settings(home: Path, **sections: Any) -> Settings:
    """Settings for ``home`` from TOML-like ``sections`` (``dispatch={...}``,
    ``executors={"claude": {...}}``); the price table is always included."""
    data: dict[str, Any] = {"prices": PRICES, **sections}
    return settings_from_mapping(data, home, None)


@dataclass
class Started:
    """Records every ``on_process_start`` call."""

    calls: list[tuple[int, int, str | None]] = field(default_factory=list)

    async def __call__(self, pid: int, pgid: int, proc_start: str | None) -> None:
        self.calls.append((pid, pgid, proc_start))


def make_ctx(
    settings: Settings,
    *,
    prompt: str = "Do the task.",
    timeout_s: float = 60.0,
    model: str | None = None,
    command: tuple[str, ...] | None = None,
    started: Started | None = None,
    task_id: int = BASE_TASK.id,
    attempt: int = 1,
    run_id: int = 11,
) -> RunContext:
    return RunContext(
        home=settings.home,
        run_id=run_id,
        attempt=attempt,
        prompt=prompt,
        timeout_s=timeout_s,
        transcript_path=settings.logs_dir / "runs" / f"{task_id}-{attempt}.jsonl",
        env=agent_env(settings, task_id, run_id),
        model=model,
        command=command,
        on_process_start=started if started is not None else Started(),
    )


async def wait_for_pids(path: Path, timeout_s: float = 30.0) -> list[int]:
    """The pids a fake wrote to ``path`` (safety-net timeout only)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not path.exists():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{path} never appeared")
        await asyncio.sleep(0.02)
    pids: list[int] = json.loads(path.read_text())
    return pids


def recorded(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return body
