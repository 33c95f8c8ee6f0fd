"""What ``vigil sensors …`` does, apart from parsing and printing.

JSON field names are a contract (scripts parse them); times are ISO 8601 UTC.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sensors.config import SensorSpec, load_sensor_specs
from sensors.execution import SensorReport
from sensors.timing import next_due
from vigil.clock import SystemClock, iso_utc
from vigil.config import Settings
from vigil.errors import InputError
from vigil.models import SensorState
from vigil.printable import printable
from vigil.store import Store


def sensor_row(spec: SensorSpec, state: SensorState | None, settings: Settings, now_ms: int) -> dict[str, object]:
    """One sensor for ``vigil sensors list --json``."""
    enabled = spec.enabled and (state is None or state.enabled)
    last_run = state.last_run_at if state else None
    failures = state.consecutive_failures if state else 0
    due = next_due(spec.schedule, last_run, failures, settings.sensor_defaults.max_backoff_ms, now_ms)
    return {
        "name": spec.name,
        "use": spec.use,
        "schedule": str(spec.schedule),
        "enabled": enabled,
        "disabled_by": None if enabled else ("config" if not spec.enabled else "command"),
        "last_run_at": iso_utc(last_run),
        "last_duration_ms": state.last_duration_ms if state else None,
        "status": state.last_status if state else None,
        "error": state.last_error if state else None,
        "next_due_at": iso_utc(due) if enabled else None,
        "created_last": state.created_last if state else 0,
        "ignored_last": state.ignored_last if state else 0,
        "dropped_last": state.dropped_last if state else 0,
        "rejected_last": state.rejected_last if state else 0,
        "consecutive_failures": failures,
    }


async def list_sensors(store: Store, settings: Settings) -> list[dict[str, object]]:
    specs = load_sensor_specs(settings)
    states = {s.name: s for s in await store.sensor_states()}
    now = SystemClock().now_ms()
    return [sensor_row(spec, states.get(spec.name), settings, now) for spec in specs]


def sensors_table(rows: Sequence[dict[str, object]]) -> str:
    """Plain text for people; ``rows`` as ``list_sensors`` returns them."""
    if not rows:
        return "no sensors configured (add [[sensors]] entries to vigil.toml; see docs/sensors.md)"
    header = ("NAME", "SCHEDULE", "ENABLED", "LAST RUN", "STATUS", "NEXT DUE", "NEW", "DUP", "FAILS")
    lines = [header]
    for row in rows:
        enabled = "yes" if row["enabled"] else f"no ({row['disabled_by']})"
        lines.append(
            (
                str(row["name"]),
                str(row["schedule"]),
                enabled,
                str(row["last_run_at"] or "never"),
                str(row["status"] or "-"),
                str(row["next_due_at"] or "-"),
                str(row["created_last"]),
                str(row["ignored_last"]),
                str(row["consecutive_failures"]),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    for row in rows:
        if row["error"]:
            text.append(f"{row['name']}: {row['error']}")
    return printable("\n".join(text))


async def run_sensors(store: Store, settings: Settings, names: Sequence[str]) -> list[SensorReport]:
    """Run the named sensors (all enabled ones when none is named) once, now."""
    from sensors.runner import SensorRunner

    runner = SensorRunner(store, settings, SystemClock(), load_sensor_specs(settings))
    return await runner.run_now(list(names) or None)


def report_json(report: SensorReport) -> dict[str, object]:
    return {
        "name": report.name,
        "status": report.status,
        "created": report.created,
        "created_ids": list(report.created_ids),
        "ignored": report.ignored,
        "dropped": report.dropped,
        "rejected": report.rejected,
        "error": report.error,
        "started_at": iso_utc(report.started_at),
        "duration_ms": report.duration_ms,
        "next_due_at": iso_utc(report.next_due_at),
    }


def report_line(report: SensorReport) -> str:
    """``inbox: ok, created 2 (#4, #5), ignored 1`` or ``http: error: …``."""
    if not report.ok:
        return f"{report.name}: {report.status}: {report.error}"
    ids = id_ranges(report.created_ids)
    text = f"{report.name}: ok, created {report.created}" + (f" ({ids})" if ids else "")
    text += f", ignored {report.ignored}"
    if report.dropped:
        text += f", dropped {report.dropped}"
    if report.rejected:
        text += f", rejected {report.rejected} (flood limit)"
    if report.error:
        text += f" — {report.error}"
    return text


MAX_ID_GROUPS = 10  # ranges of ids a report line shows; --json has them all


def id_ranges(ids: Sequence[int]) -> str:
    """``#4, #5, #6, #9`` as ``#4-#6, #9`` (three or more in a row), at most
    ``MAX_ID_GROUPS`` groups and then how many ids are left: a run that created
    10,000 tasks stays a short line."""
    runs: list[tuple[int, int]] = []
    for task_id in sorted(ids):
        if runs and task_id == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], task_id)
        else:
            runs.append((task_id, task_id))
    groups = [g for a, b in runs for g in ([(a, b)] if b - a >= 2 else [(i, i) for i in range(a, b + 1)])]
    shown = [f"#{a}" if a == b else f"#{a}-#{b}" for a, b in groups[:MAX_ID_GROUPS]]
    left = sum(b - a + 1 for a, b in groups[MAX_ID_GROUPS:])
    return ", ".join(shown) + (f" and {left} more" if left else "")


def reports_text(reports: Sequence[SensorReport], as_json: bool) -> str:
    """What ``vigil sensors run`` prints; a sensor's error text is its program's, so
    control characters are written as escapes (``vigil.printable``)."""
    if as_json:
        return printable(json.dumps([report_json(r) for r in reports], indent=2, ensure_ascii=False))
    if not reports:
        return "no enabled sensors to run"
    return printable("\n".join(report_line(r) for r in reports))


async def set_enabled(store: Store, settings: Settings, name: str, enabled: bool) -> str:
    """Enable or disable a configured sensor; returns the message to print."""
    specs = {spec.name: spec for spec in load_sensor_specs(settings)}
    spec = specs.get(name)
    if spec is None:
        known = ", ".join(specs) or "none configured"
        raise InputError(f"unknown sensor {name!r} (sensors: {known})")
    await store.set_sensor_enabled(name, enabled)
    message = f"sensor {name} {'enabled' if enabled else 'disabled'}"
    if enabled and not spec.enabled:
        message += " (but vigil.toml sets enabled = false for it, so it still does not run)"
    return message
