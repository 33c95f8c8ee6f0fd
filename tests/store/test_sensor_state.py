"""Contract: reading one sensor's state."""

from __future__ import annotations

from vigil.models import NewTask, SensorRun
from vigil.store import Store


async def test_sensor_state_is_none_until_the_sensor_ran_or_was_toggled(store: Store) -> None:
    assert await store.sensor_state("inbox") is None
    await store.set_sensor_enabled("inbox", False)
    state = await store.sensor_state("inbox")
    assert state is not None
    assert (state.name, state.enabled, state.last_run_at) == ("inbox", False, None)


async def test_sensor_state_returns_what_the_last_run_recorded(store: Store) -> None:
    run = SensorRun(started_at=1_000, duration_ms=12, status="ok", next_due_at=61_000)
    tasks = [NewTask("a", source="sensor:feed", source_key="feed:a")]
    await store.record_sensor_run("feed", run, tasks, {"cursor": "a"})
    await store.record_sensor_run("other", run, [], None)
    state = await store.sensor_state("feed")
    assert state is not None
    assert (state.last_run_at, state.last_duration_ms, state.last_status) == (1_000, 12, "ok")
    assert (state.created_last, state.next_due_at, state.state) == (1, 61_000, {"cursor": "a"})
    assert state == next(s for s in await store.sensor_states() if s.name == "feed")
