"""The header names the task that is running now, from the tasks table."""

from __future__ import annotations

from tests.tui.conftest import AppFactory, add, wait_for
from tests.tui.helpers import queue
from tui.app import VigilApp
from vigil.clock import ManualClock
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat, Outcome, OutcomeKind
from vigil.store import Store


def loop_line(app: VigilApp) -> str:
    return str(queue(app).query_one("#loop").render())


async def test_the_header_names_the_claimed_task_not_the_heartbeats(
    make_app: AppFactory, db: Store, clock: ManualClock
) -> None:
    first = await add(db, "first", priority=1)
    second = await add(db, "second", priority=2)
    claim = await db.claim_next(worker="h:1:x", lease_ms=600_000)
    assert claim is not None
    now = clock.now_ms()
    # The heartbeat still names the first task (it is written only every heartbeat).
    beat = DispatcherHeartbeat("h:1:x", 1, "h", now, now, "running", first, now)
    await db.set_loop_values({HEARTBEAT_KEY: beat.to_json()})
    app = make_app()
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: f"running #{first}" in loop_line(app), "first running")
        await db.record(claim, Outcome(OutcomeKind.SUCCESS), worker="h:1:x")
        next_claim = await db.claim_next(worker="h:1:x", lease_ms=600_000)
        assert next_claim is not None
        await wait_for(lambda: f"running #{second}" in loop_line(app), "the newly claimed task, at the next probe")
        assert f"#{first}" not in loop_line(app)
        await db.record(next_claim, Outcome(OutcomeKind.SUCCESS), worker="h:1:x")
        await wait_for(lambda: "○ idle" in loop_line(app), "idle once nothing is active, whatever the heartbeat says")
