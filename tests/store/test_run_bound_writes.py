"""Contract: a write made on behalf of a run (the agent's close, note, ask, follow-up)
checks, in the writing transaction, that the run is still open and is its task's;
the first close of a run decides and later ones are refused with what was decided.

The race is made, not waited for: the channel's store is wrapped so that the
dispatcher records the run right after the channel's own check (``bind``) has read
it open, before the channel writes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.store.contract import claim, new
from vigil.agent_channel import AgentChannel
from vigil.clock import ManualClock
from vigil.config import load_settings
from vigil.errors import Refused
from vigil.models import Claim, Outcome, OutcomeKind, TaskStatus
from vigil.store import Store

TIMED_OUT = Outcome(OutcomeKind.TIMEOUT, summary="timed out after 30m", error="timed out")


class RecordedAfterRead:
    """``store``, except that the first ``get_task`` (the last read of the channel's
    ``bind``) is followed by the dispatcher recording ``claim``'s run as timed out."""

    def __init__(self, store: Store, claim: Claim) -> None:
        self._store = store
        self._claim = claim
        self.recorded = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def get_task(self, task_id: int) -> Any:
        task = await self._store.get_task(task_id)
        if not self.recorded:
            self.recorded = True
            await self._store.record(self._claim, TIMED_OUT, worker="w1")
        return task


WRITES: dict[str, Callable[[AgentChannel], Awaitable[str]]] = {
    "close completed": lambda channel: channel.close("completed", "all done"),
    "close pending": lambda channel: channel.close("pending", "later", retry_in="1h"),
    "note": lambda channel: channel.note("still working"),
    "ask": lambda channel: channel.ask("which branch?"),
    "follow-up": lambda channel: channel.add_followup("and then this"),
}


@pytest.mark.parametrize("write", WRITES)
async def test_a_write_after_the_run_was_recorded_under_it_is_refused_and_changes_nothing(
    store: Store, clock: ManualClock, home: Path, write: str
) -> None:
    await store.add_task(new("fix the parser", max_retries=2))
    c = await claim(store)
    racing = RecordedAfterRead(store, c)
    channel = AgentChannel(racing, c.run_id, load_settings(home), clock)  # type: ignore[arg-type]
    with pytest.raises(Refused, match=rf"^refused: run #{c.run_id} has ended"):
        await WRITES[write](channel)
    assert racing.recorded  # the channel's own read saw the run open
    task = await store.get_task(c.task.id)
    (run,) = await store.list_runs(c.task.id)
    # as the dispatcher left it: pending again for its next attempt, nothing of the agent's
    assert (task.status, task.result_summary, task.question) == (TaskStatus.PENDING, "timed out after 30m", None)
    assert (run.outcome, run.agent_status) == (OutcomeKind.TIMEOUT, None)
    assert await store.list_notes(c.task.id) == []
    assert [t.id for t in await store.list_tasks()] == [c.task.id]
    assert [e.actor for e in await store.list_events(c.task.id) if e.actor == "agent"] == []


async def test_the_first_close_of_a_run_decides_and_later_ones_are_refused_with_it(
    store: Store, clock: ManualClock
) -> None:
    await store.add_task(new("wait for the release", max_retries=2))
    c = await claim(store)
    task_id = c.task.id
    retry_at = clock.now_ms() + 3_600_000
    first = await store.request_retry(task_id, retry_at, "not out yet", actor="agent", run_id=c.run_id)
    decided = rf"^refused: run #{c.run_id} already closed task #{task_id} as pending: not out yet; the first close"
    with pytest.raises(Refused, match=decided):
        await store.close_task(task_id, TaskStatus.BLOCKED, "stuck", actor="agent", run_id=c.run_id)
    with pytest.raises(Refused, match=decided):
        await store.close_task(task_id, TaskStatus.COMPLETED, "done after all", actor="agent", run_id=c.run_id)
    with pytest.raises(Refused, match=decided):
        await store.request_retry(task_id, retry_at + 1, "again", actor="agent", run_id=c.run_id)
    assert await store.get_task(task_id) == first
    (run,) = await store.list_runs(task_id)
    assert (run.agent_status, run.summary) == ("pending", "not out yet")
    # a note is no close: the run may still write one
    await store.add_note(task_id, "waiting on upstream", author="agent", run_id=c.run_id)
    assert [n.text for n in await store.list_notes(task_id)] == ["waiting on upstream"]


async def test_a_write_for_another_tasks_run_is_refused(store: Store) -> None:
    await store.add_task(new("mine"))
    other = await store.add_task(new("someone else's"))
    assert other.task_id is not None
    c = await claim(store)
    with pytest.raises(Refused, match=rf"^refused: run #{c.run_id} is not a run of task #{other.task_id}"):
        await store.add_note(other.task_id, "mine now", author="agent", run_id=c.run_id)
    with pytest.raises(Refused, match="is not a run of"):
        await store.add_task(new("child", parent_id=other.task_id), actor="agent", run_id=c.run_id)
    assert await store.list_notes(other.task_id) == []
    assert len(await store.list_tasks()) == 2


async def test_a_close_as_completed_in_a_run_whose_sandbox_failed_is_void(
    store: Store, clock: ManualClock, home: Path
) -> None:
    await store.add_task(new("fix the parser", max_retries=2))
    c = await claim(store)
    channel = AgentChannel(store, c.run_id, load_settings(home), clock)
    await channel.close("completed", "all done")  # every command it ran had failed to start
    assert (await store.get_task(c.task.id)).status is TaskStatus.COMPLETED
    broken = Outcome(OutcomeKind.SANDBOX_FAILED, summary="bwrap: setting up uid map: Permission denied")
    recorded = await store.record(c, broken, worker="w1")
    task = await store.get_task(c.task.id)
    # settled as the failed attempt it was: pending again after a backoff, attempt counted
    assert (task.status, task.attempt_count, task.completed_at) == (TaskStatus.PENDING, 1, None)
    assert task.claimed_by is None
    assert recorded.fate is not None
    assert recorded.fate.status is TaskStatus.PENDING
    (run,) = await store.list_runs(c.task.id)
    assert (run.outcome, run.agent_status) == (OutcomeKind.SANDBOX_FAILED, "completed")


async def test_a_close_as_completed_in_a_run_that_failed_otherwise_stands(
    store: Store, clock: ManualClock, home: Path
) -> None:
    await store.add_task(new("fix the parser", max_retries=2))
    c = await claim(store)
    channel = AgentChannel(store, c.run_id, load_settings(home), clock)
    await channel.close("completed", "all done")
    await store.record(c, TIMED_OUT, worker="w1")
    assert (await store.get_task(c.task.id)).status is TaskStatus.COMPLETED
