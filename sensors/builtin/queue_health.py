"""``queue_health``: failed tasks, tasks stuck past their lease and unhealthy sensors
become triage tasks.

Options: ``stale_after`` (default ``15m``: an enabled sensor whose next run is this
overdue is stale), ``failures`` (default 3 consecutive failures make a sensor
unhealthy), ``lookback`` (default ``1d``: on the first run, older failed tasks are
not reported). Triage tasks take the entry's ``priority`` (the demo home uses 3).

Every triage task has a stable key with scope ``ever``, so each problem is reported
once, however often the sensor runs:

* ``failed:<task id>:<completed_at>`` — a task failed (again, after a retry: a new key);
* ``stuck:<task id>:<started_at>`` — an active task whose lease ran out (its
  dispatcher died or hangs);
* ``failing:<sensor>:<since>`` — a sensor failed ``failures`` times in a row;
* ``stale:<sensor>:<last run>`` — a sensor has not run long after it was due.

Its own failures and tasks are never triaged (no loops).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sensors.api import FoundTask, SensorContext, sensor
from sensors.options import OptionReader
from vigil.clock import iso_utc
from vigil.durations import format_duration
from vigil.models import DedupScope, TaskStatus

FAILED_PAGE = 200


@dataclass(frozen=True)
class HealthOptions:
    stale_after_ms: int
    failures: int
    lookback_ms: int


def parse_options(raw: Mapping[str, Any], home: Path) -> HealthOptions:
    reader = OptionReader(raw, home)
    options = HealthOptions(
        reader.duration_ms("stale_after", 15 * 60_000),
        reader.int_("failures", 3, 1),
        reader.duration_ms("lookback", 86_400_000),
    )
    reader.done()
    return options


def _triage(key: str, subject: str, description: str) -> FoundTask:
    return FoundTask(
        key=key,
        subject=subject,
        description=description,
        dedup=DedupScope.EVER,
    )


@sensor(every="1m", options=parse_options)
async def queue_health(ctx: SensorContext) -> list[FoundTask]:
    """Failed and stuck tasks and unhealthy sensors become triage tasks."""
    opts = parse_options(ctx.options, ctx.home)
    now = ctx.clock.now_ms()
    own_source = f"sensor:{ctx.name}"
    tasks: list[FoundTask] = []

    since = ctx.state.get("failed_since")
    if not isinstance(since, int):
        since = now - opts.lookback_ms
    newest = since
    for task in await ctx.queue.list_tasks(statuses=[TaskStatus.FAILED], limit=FAILED_PAGE):
        finished = task.completed_at or task.updated_at
        if finished <= since or task.source == own_source:
            continue
        newest = max(newest, finished)
        tasks.append(
            _triage(
                f"failed:{task.id}:{finished}",
                f"Triage failed task #{task.id}: {task.subject}"[:300],
                f"Task #{task.id} failed at {iso_utc(finished)} after {task.attempt_count} attempt(s).\n"
                f"Result: {task.result_summary or '(none)'}\n\n"
                f"Look at `vigil task show {task.id}`; retry it, fix its cause, or leave it failed.",
            )
        )
    ctx.state["failed_since"] = newest

    for task in await ctx.queue.active_tasks():
        if task.lease_until is not None and task.lease_until < now:
            tasks.append(
                _triage(
                    f"stuck:{task.id}:{task.started_at}",
                    f"Task #{task.id} is stuck active past its lease: {task.subject}"[:300],
                    f"Task #{task.id} has been active since {iso_utc(task.started_at)}, claimed by "
                    f"{task.claimed_by}; its lease ran out at {iso_utc(task.lease_until)}. "
                    "Is its dispatcher (`vigil run`) still alive?",
                )
            )

    failing: dict[str, int] = {k: v for k, v in ctx.state.get("failing", {}).items() if isinstance(v, int)}
    for state in await ctx.queue.sensor_states():
        if state.name == ctx.name or state.name not in ctx.peers or not state.enabled:
            continue
        if state.consecutive_failures >= opts.failures:
            started = failing.setdefault(state.name, state.last_run_at or now)
            tasks.append(
                _triage(
                    f"failing:{state.name}:{started}",
                    f"Sensor {state.name} keeps failing ({state.consecutive_failures} runs in a row)",
                    f"Last error: {state.last_error}\nLast run: {iso_utc(state.last_run_at)}\n\n"
                    "See `vigil sensors list`; fix its configuration or target, "
                    f"then `vigil sensors run {state.name}`.",
                )
            )
        elif state.consecutive_failures == 0:
            failing.pop(state.name, None)
        if state.next_due_at is not None and now - state.next_due_at > opts.stale_after_ms:
            tasks.append(
                _triage(
                    f"stale:{state.name}:{state.last_run_at}",
                    f"Sensor {state.name} has not run for {format_duration(now - (state.last_run_at or now))}",
                    f"It was due at {iso_utc(state.next_due_at)}. Is the loop (`vigil run`) running?",
                )
            )
    ctx.state["failing"] = failing
    return tasks
