"""The schedule and queue_health sensors, driven by the injected clock."""

from __future__ import annotations

from datetime import UTC, datetime

from sensors.api import FoundTask, SensorContext
from sensors.builtin.queue_health import queue_health
from sensors.builtin.recurring import schedule
from tests.sensors.conftest import RunnerFactory, SpecFactory
from vigil.clock import ManualClock
from vigil.models import NewTask, Outcome, OutcomeKind, SensorRun
from vigil.store.sqlite import SqliteStore

MIN = 60_000
HOUR = 60 * MIN


def at(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


async def test_schedule_makes_one_task_per_occurrence(
    store: SqliteStore, clock: ManualClock, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    clock.set(at("2026-03-02 09:10"))
    spec = make_spec(schedule, "heartbeat", every="1h", options={"subject": "Heartbeat {date} {time} ({weekday})"})
    runner = make_runner(spec)
    assert (await runner.run_now())[0].created == 1
    clock.advance(20 * MIN)
    assert (await runner.run_now())[0].created == 0  # same occurrence (09:00)
    clock.set(at("2026-03-02 12:05"))  # the machine was off at 10:00 and 11:00
    assert (await runner.run_now())[0].created == 1  # missed ones collapse into the latest
    subjects = [t.subject for t in await store.list_tasks()]
    assert subjects == ["Heartbeat 2026-03-02 12:00 (Monday)", "Heartbeat 2026-03-02 09:00 (Monday)"]
    keys = [t.source_key for t in await store.list_tasks()]
    assert keys == ["heartbeat:2026-03-02T12:00:00Z", "heartbeat:2026-03-02T09:00:00Z"]


async def test_schedule_with_cron_and_a_lost_cursor_still_dedups(
    store: SqliteStore, clock: ManualClock, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    clock.set(at("2026-03-06 09:30"))  # a Friday
    spec = make_spec(schedule, "standup", every=None, cron="0 9 * * 1-5", options={"subject": "Standup notes {date}"})
    await make_runner(spec).run_now()
    await store.record_sensor_run("standup", _ok_run(clock), [], {})  # the cursor is lost
    clock.set(at("2026-03-08 10:00"))  # Sunday: the last occurrence is still Friday's
    report = (await make_runner(spec).run_now())[0]
    assert (report.created, report.ignored) == (0, 1)  # scope ever: once per occurrence
    clock.set(at("2026-03-09 09:00"))
    assert (await make_runner(spec).run_now())[0].created == 1
    assert [t.subject for t in await store.list_tasks()] == ["Standup notes 2026-03-09", "Standup notes 2026-03-06"]


def _ok_run(clock: ManualClock) -> SensorRun:
    return SensorRun(started_at=clock.now_ms(), duration_ms=0, status="ok")


async def _fail_a_task(store: SqliteStore, subject: str) -> int:
    added = await store.add_task(NewTask(subject, priority=1, max_retries=0))
    claim = await store.claim_next(worker="w", lease_ms=MIN)
    assert claim is not None
    await store.record(claim, Outcome(OutcomeKind.FAILED, summary="it broke"), worker="w")
    assert added.task_id is not None
    return added.task_id


async def broken(ctx: SensorContext) -> list[FoundTask]:
    raise RuntimeError("cannot reach the feed")


async def test_queue_health_triages_failed_stuck_and_unhealthy_once(
    store: SqliteStore, clock: ManualClock, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    failed_id = await _fail_a_task(store, "deploy the site")
    await store.add_task(NewTask("long job"))
    stuck = await store.claim_next(worker="dead-dispatcher", lease_ms=MIN)
    assert stuck is not None
    failing = make_spec(broken, "feedwatch")
    for _ in range(3):
        await make_runner(failing).run_now()
    clock.advance(2 * MIN)  # the lease ran out

    health = make_spec(queue_health, "queue_health", options={"failures": 3}, priority=3)
    runner = make_runner(health, failing)
    report = (await runner.run_now(["queue_health"]))[0]
    assert (report.status, report.created) == ("ok", 3)
    triage = {t.source_key or "": t for t in await store.list_tasks() if t.source == "sensor:queue_health"}
    keys = sorted(triage)
    assert keys[0].startswith(f"queue_health:failed:{failed_id}:")
    assert keys[1].startswith("queue_health:failing:feedwatch:")
    assert keys[2].startswith(f"queue_health:stuck:{stuck.task.id}:")
    assert all(t.priority == 3 for t in triage.values())
    assert "cannot reach the feed" in triage[keys[1]].description

    clock.advance(MIN)
    await make_runner(failing).run_now()  # still failing
    again = (await runner.run_now(["queue_health"]))[0]
    assert again.created == 0  # each problem is reported once

    clock.advance(MIN)
    second_failure = await _fail_a_task(store, "another")
    third = (await runner.run_now(["queue_health"]))[0]
    assert third.created == 1
    newest = (await store.list_tasks())[0]
    assert newest.subject == f"Triage failed task #{second_failure}: another"


async def test_queue_health_reports_a_stale_sensor(
    store: SqliteStore, clock: ManualClock, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    async def quiet(ctx: SensorContext) -> list[FoundTask]:
        return []

    await make_runner(make_spec(quiet, every="1m")).run_now()
    clock.advance(HOUR)  # nobody ran it for an hour
    health = make_spec(queue_health, options={"stale_after": "15m"})
    report = (await make_runner(health, make_spec(quiet, every="1m")).run_now(["queue_health"]))[0]
    assert report.created == 1
    task = (await store.list_tasks())[0]
    assert task.subject == "Sensor quiet has not run for 1h00m"
