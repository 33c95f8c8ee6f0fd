"""Sensor test fixtures: settings for a temp home, spec and runner factories."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from sensors.api import HttpPool, SensorFunc, meta_of
from sensors.execution import SensorReport
from sensors.runner import SensorRunner, parse_schedule
from sensors.spec import CatchUp, SensorSpec
from vigil.clock import ManualClock
from vigil.config import SensorDefaults, Settings, StoreSettings
from vigil.store.sqlite import SqliteStore

SpecFactory = Callable[..., SensorSpec]
RunnerFactory = Callable[..., SensorRunner]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings for a home in tmp_path whose database is the ``store`` fixture's file."""
    return Settings(
        home=tmp_path,
        config_path=None,
        store=StoreSettings(path=tmp_path / "data" / "vigil.db"),
        sensor_defaults=SensorDefaults(jitter_ms=0),
    )


def make_skills(home: Path, *names: str) -> None:
    """Skills the sensors' tasks name must exist in the home: ``skills/<name>/SKILL.md``."""
    for name in names:
        (home / "skills" / name).mkdir(parents=True, exist_ok=True)
        (home / "skills" / name / "SKILL.md").write_text(f"---\ndescription: {name}\n---\nDo {name}.\n")


@pytest.fixture
def make_spec() -> SpecFactory:
    def make(
        func: SensorFunc,
        name: str | None = None,
        *,
        every: str | None = "1m",
        cron: str | None = None,
        timeout_ms: int = 5000,
        max_tasks: int = 100,
        options: Mapping[str, Any] | None = None,
        enabled: bool = True,
        priority: int | None = None,
        skills: tuple[str, ...] | None = None,
        timezone: str | None = None,
        catch_up: CatchUp = "once",
    ) -> SensorSpec:
        meta = meta_of(func)
        if cron:
            schedule = parse_schedule(None, cron, timezone)
        else:
            schedule = parse_schedule(every or meta.every, meta.cron if not every else None)
        return SensorSpec(
            name=name or func.__name__,
            use=func.__name__,
            func=func,
            schedule=schedule,
            timeout_ms=timeout_ms,
            max_tasks=max_tasks,
            enabled=enabled,
            options=dict(options or {}),
            priority=priority,
            skills=skills,
            catch_up=catch_up,
        )

    return make


@pytest.fixture
def make_runner(store: SqliteStore, settings: Settings, clock: ManualClock) -> RunnerFactory:
    def make(*specs: SensorSpec, on_created: Callable[[], None] | None = None) -> SensorRunner:
        return SensorRunner(store, settings, clock, specs, on_created=on_created)

    return make


async def tick(runner: SensorRunner) -> list[SensorReport]:
    """What the scheduler's jobs do at the clock's now (``SensorRunner._tick``), for
    each enabled sensor in turn; the reports of the runs made."""
    env = runner.run_env(HttpPool())
    reports = [await runner.consider(spec, env, None) for spec in runner.specs if spec.enabled]
    return [report for report in reports if report is not None]
