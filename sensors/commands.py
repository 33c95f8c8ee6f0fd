"""What ``vigil sensors …`` does, apart from parsing and printing.

JSON field names are a contract (scripts parse them); times are ISO 8601 UTC.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sensors.config import load_sensor_specs
from sensors.execution import SensorReport
from sensors.spec import SensorSpec
from sensors.timing import next_due
from vigil.clock import SystemClock, iso_utc
from vigil.config import Settings
from vigil.errors import InputError
from vigil.models import SensorState
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
    return "\n".join(text)


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
    ids = ", ".join(f"#{i}" for i in report.created_ids)
    text = f"{report.name}: ok, created {report.created}" + (f" ({ids})" if ids else "")
    text += f", ignored {report.ignored}"
    if report.dropped:
        text += f", dropped {report.dropped}"
    if report.rejected:
        text += f", rejected {report.rejected} (flood limit)"
    if report.error:
        text += f" — {report.error}"
    return text


def reports_text(reports: Sequence[SensorReport], as_json: bool) -> str:
    if as_json:
        return json.dumps([report_json(r) for r in reports], indent=2, ensure_ascii=False)
    if not reports:
        return "no enabled sensors to run"
    return "\n".join(report_line(r) for r in reports)


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
