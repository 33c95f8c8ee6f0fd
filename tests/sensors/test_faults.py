"""A failing, slow or misbehaving sensor is recorded and isolated: the others run on
and store their tasks, and nothing of the bad run is stored."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from sensors.api import FoundTask, HttpPool, SensorContext
from sensors.execution import RunEnv, execute, run_sensor
from sensors.runner import SensorRunner
from tests.sensors.conftest import RunnerFactory, SpecFactory, make_skills
from vigil.clock import ManualClock
from vigil.config import LimitsSettings, Settings
from vigil.models import SensorState
from vigil.store.sqlite import SqliteStore


async def good(ctx: SensorContext) -> list[FoundTask]:
    ctx.state["cursor"] = ctx.state.get("cursor", 0) + 1
    return [FoundTask(key="a", subject="good a"), FoundTask(key="b", subject="good b")]


async def raises(ctx: SensorContext) -> list[FoundTask]:
    ctx.state["cursor"] = "moved"
    raise RuntimeError("boom: target unreachable")


async def returns_dict(ctx: SensorContext) -> Any:
    return {"key": "x", "subject": "not a list"}


async def returns_strings(ctx: SensorContext) -> Any:
    return [FoundTask(key="ok", subject="fine"), "not a task"]


async def empty_key(ctx: SensorContext) -> list[FoundTask]:
    return [FoundTask(key="k1", subject="fine"), FoundTask(key=" ", subject="no key")]


async def empty_subject(ctx: SensorContext) -> list[FoundTask]:
    return [FoundTask(key="k1", subject="fine"), FoundTask(key="k2", subject="")]


async def hangs(ctx: SensorContext) -> list[FoundTask]:
    ctx.state["cursor"] = "moved"
    await asyncio.sleep(3600)
    return []


async def floods(ctx: SensorContext) -> list[FoundTask]:
    return [FoundTask(key=f"k{i}", subject=f"task {i}") for i in range(100_000)]


async def bad_state(ctx: SensorContext) -> list[FoundTask]:
    ctx.state["when"] = object()
    return [FoundTask(key="k", subject="would be stored")]


async def exits(ctx: SensorContext) -> list[FoundTask]:
    raise SystemExit(3)


async def states(store: SqliteStore) -> dict[str, SensorState]:
    return {s.name: s for s in await store.sensor_states()}


@pytest.mark.parametrize(
    ("bad", "status", "error_part"),
    [
        (raises, "error", "RuntimeError: boom: target unreachable"),
        (returns_dict, "error", "returned dict, expected a list of FoundTask"),
        (returns_strings, "error", "item 1 is str, expected sensors.FoundTask"),
        (empty_key, "error", "item 1: empty key"),
        (empty_subject, "error", "item 1 (key 'k2'): empty subject"),
        (hangs, "timeout", "timed out after 0.2s"),
        (bad_state, "error", "state is not JSON-serialisable"),
        (exits, "error", "SystemExit: 3"),
    ],
)
async def test_a_bad_sensor_is_recorded_and_the_others_still_store_their_tasks(
    store: SqliteStore, make_spec: SpecFactory, make_runner: RunnerFactory, bad: Any, status: str, error_part: str
) -> None:
    runner = make_runner(make_spec(good), make_spec(bad, "bad", timeout_ms=200))
    reports = {r.name: r for r in await runner.run_now()}

    assert reports["good"].status == "ok"
    assert reports["good"].created == 2
    assert reports["bad"].status == status
    assert error_part in (reports["bad"].error or "")
    tasks = await store.list_tasks()
    assert sorted(t.source_key or "" for t in tasks) == ["good:a", "good:b"]  # nothing of the bad run
    saved = await states(store)
    assert saved["bad"].last_status == status
    assert error_part in (saved["bad"].last_error or "")
    assert saved["bad"].consecutive_failures == 1
    assert saved["bad"].state == {}  # its cursor was not saved
    assert saved["good"].state == {"cursor": 1}


async def test_a_runaway_sensor_is_capped_quickly_and_the_excess_counted(
    store: SqliteStore, make_spec: SpecFactory, make_runner: RunnerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    runner = make_runner(make_spec(floods, max_tasks=50), make_spec(good))
    reports = {r.name: r for r in await runner.run_now()}

    assert reports["floods"].status == "ok"
    assert reports["floods"].created == 50
    assert reports["floods"].dropped == 99_950
    assert "dropped 99950" in (reports["floods"].error or "")
    assert "dropped 99950" in caplog.text  # logged, not silent
    tasks = await store.list_tasks(limit=1000)
    floods_keys = sorted(int((t.source_key or "").split(":k")[1]) for t in tasks if t.source == "sensor:floods")
    assert floods_keys == list(range(50))  # the first N are kept
    saved = await states(store)
    assert saved["floods"].dropped_last == 99_950
    assert saved["good"].created_last == 2


@pytest.mark.slow
async def test_a_hanging_sensor_does_not_delay_the_others(
    store: SqliteStore, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    seen_while_hanging: list[str] = []

    async def hangs_watching(ctx: SensorContext) -> list[FoundTask]:
        while True:  # wait, inside the run, until the good sensor's tasks are stored
            tasks = await ctx.queue.list_tasks()
            if tasks:
                seen_while_hanging.extend(t.subject for t in tasks)
                await asyncio.sleep(3600)
            await asyncio.sleep(0.01)

    runner = make_runner(make_spec(hangs_watching, timeout_ms=5000), make_spec(good))
    reports = {r.name: r for r in await runner.run_now()}

    assert sorted(seen_while_hanging) == ["good a", "good b"]
    assert reports["hangs_watching"].status == "timeout"
    assert reports["good"].status == "ok"


async def test_state_is_saved_only_with_the_tasks_of_its_run(
    store: SqliteStore, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    calls = {"n": 0}

    async def flaky(ctx: SensorContext) -> list[FoundTask]:
        calls["n"] += 1
        ctx.state["seen"] = calls["n"]
        if calls["n"] == 2:
            raise RuntimeError("second run fails")
        return [FoundTask(key=f"run{calls['n']}", subject=f"run {calls['n']}")]

    runner = make_runner(make_spec(flaky))
    await runner.run_now()
    assert (await states(store))["flaky"].state == {"seen": 1}
    await runner.run_now()
    assert (await states(store))["flaky"].state == {"seen": 1}  # the failed run's cursor is dropped
    await runner.run_now()
    assert (await states(store))["flaky"].state == {"seen": 3}
    assert sorted(t.subject for t in await store.list_tasks()) == ["run 1", "run 3"]


async def test_source_and_key_are_namespaced_and_entry_defaults_apply(
    store: SqliteStore, make_spec: SpecFactory, make_runner: RunnerFactory, settings: Settings
) -> None:
    make_skills(settings.home, "triage", "a")

    async def finds(ctx: SensorContext) -> list[FoundTask]:
        return [FoundTask(key="x", subject="defaults"), FoundTask(key="y", subject="own", priority=1, skills=("a",))]

    await make_runner(make_spec(finds, "watcher", priority=7, skills=("triage",))).run_now()
    by_key = {t.source_key: t for t in await store.list_tasks()}
    assert by_key["watcher:x"].source == "sensor:watcher"
    assert (by_key["watcher:x"].priority, by_key["watcher:x"].skills) == (7, ("triage",))
    assert (by_key["watcher:y"].priority, by_key["watcher:y"].skills) == (1, ("a",))


async def test_duplicates_are_dropped_by_the_database_and_counted_as_ignored(
    store: SqliteStore, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    runner = make_runner(make_spec(good))
    first = (await runner.run_now())[0]
    second = (await runner.run_now())[0]
    assert (first.created, first.ignored) == (2, 0)
    assert (second.created, second.ignored) == (0, 2)
    assert len(await store.list_tasks()) == 2
    assert (await states(store))["good"].ignored_last == 2


async def test_on_created_is_called_only_when_a_run_stored_new_tasks(
    store: SqliteStore, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    woken: list[int] = []
    runner = make_runner(make_spec(good), on_created=lambda: woken.append(1))
    await runner.run_now()
    assert woken == [1]
    await runner.run_now()  # only duplicates
    assert woken == [1]


async def test_after_commit_steps_run_only_when_the_run_was_stored(
    store: SqliteStore, make_spec: SpecFactory, make_runner: RunnerFactory
) -> None:
    done: list[str] = []

    async def commits(ctx: SensorContext) -> list[FoundTask]:
        ctx.after_commit(lambda: done.append("moved"))
        if ctx.options.get("fail"):
            raise RuntimeError("after registering")
        return [FoundTask(key="k", subject="s")]

    await make_runner(make_spec(commits, options={"fail": True})).run_now()
    assert done == []
    await make_runner(make_spec(commits)).run_now()
    assert done == ["moved"]


async def test_a_flood_limit_refusal_is_counted_and_skips_after_commit_steps(
    tmp_path: Path, settings: Settings, clock: ManualClock, make_spec: SpecFactory
) -> None:
    done: list[str] = []

    async def chatty(ctx: SensorContext) -> list[FoundTask]:
        ctx.after_commit(lambda: done.append("moved"))
        return [FoundTask(key=f"k{i}", subject=f"task {i}") for i in range(3)]

    limits = LimitsSettings(per_source={"sensor:chatty": 2})
    store = await SqliteStore.open(tmp_path / "limited.db", clock=clock, limits=limits)
    try:
        report = (await SensorRunner(store, settings, clock, [make_spec(chatty)]).run_now())[0]
        assert (report.status, report.created, report.rejected) == ("ok", 2, 1)
        assert done == []  # the refused task's file (say) must not be moved away
        state = await store.sensor_state("chatty")
        assert state is not None
        assert state.rejected_last == 1
    finally:
        await store.close()


async def test_a_sensors_run_is_a_value_and_stores_nothing_until_recorded(
    store: SqliteStore, settings: Settings, clock: ManualClock, make_spec: SpecFactory
) -> None:
    done: list[str] = []

    async def commits(ctx: SensorContext) -> list[FoundTask]:
        ctx.state["cursor"] = 7
        ctx.after_commit(lambda: done.append("moved"))
        return [FoundTask(key="k", subject="s")]

    spec = make_spec(commits)
    env = RunEnv(store, clock, HttpPool(), settings.home, max_backoff_ms=60_000, peers=("commits",))
    result = await run_sensor(spec, env, None)
    assert (result.status, [t.subject for t in result.tasks], result.state) == ("ok", ["s"], {"cursor": 7})
    assert (len(result.after_commit), done) == (1, [])  # asked for, not run
    assert await store.list_tasks() == []
    assert await store.sensor_state("commits") is None

    report = await execute(spec, env, None)
    assert (report.status, report.created, done) == ("ok", 1, ["moved"])
