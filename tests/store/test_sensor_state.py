"""Contract: reading one sensor's state, and recording the runs it did not make."""

from __future__ import annotations

from vigil.models import NewTask, SensorRun, SensorSkip
from vigil.store import Store
from vigil.store.state import MAX_SKIPS


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


async def test_a_skip_is_kept_in_the_sensors_state_and_a_stretch_grows_until_a_run(store: Store) -> None:
    await store.record_sensor_skip("cron", SensorSkip("downtime", 1_000, 3_000, 3))  # never ran: makes its row
    await store.record_sensor_skip("cron", SensorSkip("downtime", 4_000, 4_000))
    await store.record_sensor_skip("cron", SensorSkip("downtime", 4_000, 4_000))  # another process saw it too
    await store.record_sensor_skip("cron", SensorSkip("disabled", 5_000, 5_000))
    state = await store.sensor_state("cron")
    assert state is not None
    assert state.skips == (SensorSkip("downtime", 1_000, 4_000, 4), SensorSkip("disabled", 5_000, 5_000))
    await store.record_sensor_run("cron", SensorRun(started_at=6_000, duration_ms=1, status="ok"), [], None)
    await store.record_sensor_skip("cron", SensorSkip("disabled", 7_000, 7_000))  # a run came between
    state = await store.sensor_state("cron")
    assert state is not None
    assert state.skips[-2:] == (SensorSkip("disabled", 5_000, 5_000), SensorSkip("disabled", 7_000, 7_000))
    assert state.enabled  # a skip does not touch the rest of the row
    assert state == next(s for s in await store.sensor_states() if s.name == "cron")


async def test_only_the_latest_stretches_of_skips_are_kept(store: Store) -> None:
    for n in range(MAX_SKIPS + 5):
        reason = ("busy", "backoff")[n % 2]
        await store.record_sensor_skip("flaky", SensorSkip(reason, n * 1_000, n * 1_000))
    state = await store.sensor_state("flaky")
    assert state is not None
    assert [s.first_at for s in state.skips] == [n * 1_000 for n in range(5, MAX_SKIPS + 5)]
