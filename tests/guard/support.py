"""Builders for the guardrail tests: settings with a recording alert hook, a guard on
the real store, and helpers that record runs with a cost."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from vigil.config import Settings, settings_from_mapping
from vigil.models import NewTask, Outcome, OutcomeKind, Task
from vigil.store import Store

RECORDER = Path(__file__).with_name("alert_recorder.py")


def guard_settings(home: Path, events_file: Path, mode: str = "ok", **sections: dict[str, Any]) -> Settings:
    """Settings whose alert hook appends each event to ``events_file``."""
    data: dict[str, Any] = {"alerts": {"command": [sys.executable, str(RECORDER), str(events_file), mode]}}
    for name, table in sections.items():
        data.setdefault(name, {}).update(table)
    return settings_from_mapping(data, home, None)


def recorded(events_file: Path) -> list[dict[str, Any]]:
    if not events_file.exists():
        return []
    return [json.loads(line) for line in events_file.read_text().splitlines()]


async def spend(store: Store, usd: float, *, priority: int = 5) -> Task:
    """Add, claim and finish a task whose run cost ``usd``."""
    await store.add_task(NewTask(f"costs {usd}", priority=priority))
    claim = await store.claim_next(worker="w", lease_ms=60_000)
    assert claim is not None
    return (await store.record(claim, Outcome(OutcomeKind.SUCCESS, cost_usd=usd), worker="w")).task


async def a_task(store: Store, subject: str = "work") -> Task:
    result = await store.add_task(NewTask(subject))
    assert result.task_id is not None
    return await store.get_task(result.task_id)
