"""``schedule``: the recurring-task sensor, "cron in a column" — one task per occurrence.

Options: ``subject`` (required) and ``description``, templates with ``{date}``
(``2026-01-31``), ``{time}`` (``09:00``), ``{datetime}`` (ISO 8601), ``{weekday}``
(``Monday``) and ``{name}``, in the cron's time zone (UTC for ``every``). The entry's
``every``/``cron`` is both when the sensor runs and what an occurrence is: with
``every = "1h"`` an occurrence is each full UTC hour, with a cron each matching minute.

Each occurrence's key is its time and its scope is ``ever``, so it becomes exactly
one task however often the sensor runs and however many processes run it. Missed
occurrences (the machine was off) collapse into the latest one.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sensors.api import FoundTask, SensorContext, sensor
from sensors.options import OptionReader
from vigil.models import DedupScope

FIELDS = ("date", "time", "datetime", "weekday", "name")


def _render(template: str, values: Mapping[str, str], key: str) -> str:
    try:
        return template.format_map(values)
    except KeyError as err:
        raise ValueError(f"{key}: unknown placeholder {{{err.args[0]}}} (use {', '.join(FIELDS)})") from None
    except (ValueError, IndexError) as err:
        raise ValueError(f"{key}: bad template: {err}") from None


def _values(moment: datetime, name: str) -> dict[str, str]:
    return {
        "date": moment.strftime("%Y-%m-%d"),
        "time": moment.strftime("%H:%M"),
        "datetime": moment.isoformat(timespec="minutes"),
        "weekday": moment.strftime("%A"),
        "name": name,
    }


def parse_options(raw: Mapping[str, Any], home: Path) -> tuple[str, str]:
    reader = OptionReader(raw, home)
    subject = reader.str_("subject")
    description = reader.str_("description", "")
    reader.done()
    sample = _values(datetime(2026, 1, 1, tzinfo=UTC), "sample")
    _render(subject, sample, "subject")
    _render(description, sample, "description")
    return subject, description


@sensor(options=parse_options)
async def schedule(ctx: SensorContext) -> list[FoundTask]:
    """Recurring tasks from every/cron and a subject template."""
    subject, description = parse_options(ctx.options, ctx.home)
    occurrence = ctx.schedule.occurrence_at_or_before(ctx.clock.now_ms())
    if ctx.state.get("last") == occurrence:
        return []
    moment = datetime.fromtimestamp(occurrence / 1000, tz=ctx.schedule.tz)
    values = _values(moment, ctx.name)
    ctx.state["last"] = occurrence
    return [
        FoundTask(
            key=moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            subject=_render(subject, values, "subject"),
            description=_render(description, values, "description"),
            dedup=DedupScope.EVER,
        )
    ]
