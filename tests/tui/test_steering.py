"""Steering writes on real SQLite: results and plain refusals."""

from __future__ import annotations

import asyncio

import pytest

from tests.tui.conftest import add
from tui.context import Context
from tui.forms import DeferChoice
from tui.steering import Action, apply, apply_many, refusal, summarize
from vigil.clock import ManualClock
from vigil.config import Settings
from vigil.errors import InvalidTransition
from vigil.models import TaskStatus
from vigil.store import Store


@pytest.mark.parametrize(
    ("status", "action", "text"),
    [
        ("active", Action.DEFER, "#412 already started, not deferred"),
        ("completed", Action.CANCEL, "#412 already completed, not canceled"),
        ("canceled", Action.RAISE, "#412 already canceled, not raised"),
        ("pending", Action.RETRY, "#412 still pending, not retried"),
    ],
)
def test_refusals_say_what_happened_first(status: str, action: Action, text: str) -> None:
    assert refusal(InvalidTransition(412, status, "x"), action) == text


async def test_lowering_at_the_bottom_is_a_plain_no(db: Store) -> None:
    task_id = await add(db, "bottom", priority=9)
    task = await db.get_task(task_id)
    report = await apply(db, Action.LOWER, task)
    assert not report.ok
    assert report.message == f"#{task_id} is already at the least urgent priority"


async def test_every_action_goes_through_the_conditional_write(db: Store) -> None:
    task_id = await add(db, "t")
    seen = await db.get_task(task_id)
    await db.close_task(task_id, TaskStatus.COMPLETED, "done", actor="agent")
    choice = DeferChoice("by 1 hour", by_ms=3_600_000)
    reports = [await apply(db, action, seen, choice=choice, reason="no") for action in Action]
    assert [r.ok for r in reports] == [False] * len(Action)
    assert (await db.get_task(task_id)).status is TaskStatus.COMPLETED
    assert summarize(reports)[0].startswith(f"0 of {len(Action)} done")


async def test_two_quick_steps_both_count_from_a_stale_view(db: Store, settings: Settings, clock: ManualClock) -> None:
    """Two presses of `-` before the table reloads: both start from the row as it
    was shown (priority 5), yet the second lowers what the first left."""
    task_id = await add(db, "pressed twice", priority=5)
    shown = await db.get_task(task_id)
    ctx = Context(db, clock, settings)
    first, second = await asyncio.gather(apply_many(ctx, Action.LOWER, [shown]), apply_many(ctx, Action.LOWER, [shown]))
    assert [first[0].message, second[0].message] == [f"#{task_id} priority 5 → 6", f"#{task_id} priority 6 → 7"]
    assert (await db.get_task(task_id)).priority == 7
