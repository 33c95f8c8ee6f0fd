"""What ``vigil sensors …`` does, apart from parsing and printing.

JSON field names are a contract (scripts parse them); times are ISO 8601 UTC.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sensors.config import load_sensor_specs
from sensors.execution import SensorReport
from sensors.runner import SensorRunner
from sensors.spec import SensorSpec
from sensors.timing import MAX_COUNTED, due_at
from vigil.clock import SystemClock, iso_utc
from vigil.config import Settings
from vigil.errors import InputError
from vigil.models import SensorSkip, SensorState
from vigil.printable import printable
from vigil.store import Store


def sensor_row(spec: SensorSpec, state: SensorState | None, settings: Settings, now_ms: int) -> dict[str, object]:
    """One sensor for ``vigil sensors list --json``."""
    enabled = spec.enabled and (state is None or state.enabled)
    last_run = state.last_run_at if state else None
    failures = state.consecutive_failures if state else 0
    due = due_at(spec.schedule, state, settings.sensor_defaults.max_backoff_ms, now_ms)
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
        "catch_up": spec.catch_up,
        "skips": [skip_record(skip) for skip in (state.skips if state else ())],
    }


def skip_record(skip: SensorSkip) -> dict[str, object]:
    """One stretch of runs not made, for JSON: ``runs`` of them, due from ``first_at``
    to ``last_at``."""
    return {
        "reason": skip.reason,
        "runs": skip.runs,
        "first_at": iso_utc(skip.first_at),
        "last_at": iso_utc(skip.last_at),
    }


def runs_text(runs: int) -> str:
    """A count of skipped runs; a cron's are counted up to ``MAX_COUNTED`` at a time."""
    return f"{runs}+" if runs >= MAX_COUNTED else str(runs)


async def list_sensors(store: Store, settings: Settings) -> list[dict[str, object]]:
    specs = load_sensor_specs(settings)
    states = {s.name: s for s in await store.sensor_states()}
    now = SystemClock().now_ms()
    return [sensor_row(spec, states.get(spec.name), settings, now) for spec in specs]


def sensors_table(rows: Sequence[dict[str, object]]) -> str:
    """Plain text for people; ``rows`` as ``list_sensors`` returns them."""
    if not rows:
        return "no sensors configured (add [[sensors]] entries to vigil.toml; see docs/sensors.md)"
    header = ("NAME", "SCHEDULE", "ENABLED", "LAST RUN", "STATUS", "NEXT DUE", "NEW", "DUP", "FAILS", "SKIPPED")
    lines = [header]
    for row in rows:
        enabled = "yes" if row["enabled"] else f"no ({row['disabled_by']})"
        skips = row["skips"]
        assert isinstance(skips, list)
        latest = f"{runs_text(skips[-1]['runs'])} {skips[-1]['reason']}" if skips else "-"
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
                latest,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    for row in rows:
        if row["error"]:
            text.append(f"{row['name']}: {row['error']}")
    return printable("\n".join(text))


async def list_skips(store: Store, settings: Settings, names: Sequence[str]) -> list[dict[str, object]]:
    """The runs not made, newest first, of the named sensors (every configured one
    when none is named) for ``vigil sensors skips --json``; raises ``InputError`` for
    an unknown name."""
    configured = [spec.name for spec in load_sensor_specs(settings)]
    unknown = [name for name in names if name not in configured]
    if unknown:
        raise InputError(f"unknown sensor {unknown[0]!r} (sensors: {', '.join(configured) or 'none configured'})")
    chosen = set(names or configured)
    found = [
        {"name": state.name} | skip_record(skip)
        for state in await store.sensor_states()
        if state.name in chosen
        for skip in state.skips
    ]
    return sorted(found, key=lambda row: str(row["last_at"]), reverse=True)


def skips_table(rows: Sequence[dict[str, object]]) -> str:
    """Plain text for people; ``rows`` as ``list_skips`` returns them."""
    if not rows:
        return "no skipped runs"
    lines = [("NAME", "REASON", "RUNS", "FIRST DUE", "LAST DUE")]
    for row in rows:
        runs = row["runs"]
        assert isinstance(runs, int)
        lines.append((str(row["name"]), str(row["reason"]), runs_text(runs), str(row["first_at"]), str(row["last_at"])))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines)


async def run_sensors(store: Store, settings: Settings, names: Sequence[str]) -> list[SensorReport]:
    """Run the named sensors (all enabled ones when none is named) once, now."""
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
