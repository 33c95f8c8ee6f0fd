"""Cron schedules across daylight-saving changes: every change of a year in three
zones, against the fire times docs/sensors.md promises (``expected_fires``, read
from zoneinfo alone). The same changes through the real daemon are in
tests/reliability/dst.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from sensors.runner import parse_schedule
from sensors.timing import Schedule
from tests.reliability.dst import EXPRESSIONS, ZONES, expected_fires, transitions
from vigil.clock import ManualClock

DAY_MS = 86_400_000
MORE = ("0 3 * * *", "15,45 2 * * *", "*/30 1-3 * * *", "0 */2 * * *")


def _utc(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%m-%d %H:%M")


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("expression", EXPRESSIONS + MORE)
def test_each_wall_time_fires_once_through_every_change_of_the_year(expression: str, zone: str) -> None:
    schedule = parse_schedule(None, expression, zone)
    changes = transitions(zone)
    assert len(changes) == 2
    for at in changes:
        start, end = at - DAY_MS, at + DAY_MS
        fires, moment = [], schedule.next_after(start - 1)
        while moment < end:
            fires.append(moment)
            moment = schedule.next_after(moment)
        assert [_utc(f) for f in fires] == [_utc(f) for f in expected_fires(expression, zone, start, end)]
        for previous, fire in pairwise(fires):
            assert schedule.occurrence_at_or_before(fire) == fire
            assert schedule.occurrence_at_or_before(fire - 1) == previous


def test_the_repeated_hour_and_the_gap_as_the_docs_say() -> None:
    """Europe/Berlin, 2026: clocks go forward at 02:00 on 29 March, back at 03:00 on
    25 October (01:00 UTC both times)."""
    every_15 = parse_schedule(None, "*/15 * * * *", "Europe/Berlin")
    nightly = parse_schedule(None, "30 2 * * *", "Europe/Berlin")
    in_hour_2 = parse_schedule(None, "*/20 2 * * *", "Europe/Berlin")

    def walk(schedule: Schedule, after: str, count: int) -> list[str]:
        moment = int(datetime.fromisoformat(after).timestamp() * 1000)
        found = []
        for _ in range(count):
            moment = schedule.next_after(moment)
            found.append(datetime.fromtimestamp(moment / 1000, tz=UTC).strftime("%H:%MZ"))
        return found

    # autumn: every 15 minutes goes on through both passes of 02:00-03:00
    assert walk(every_15, "2026-10-25T00:40+00:00", 6) == ["00:45Z", "01:00Z", "01:15Z", "01:30Z", "01:45Z", "02:00Z"]
    # autumn: a fixed time fires on the first pass only
    assert walk(nightly, "2026-10-24T12:00+00:00", 2) == ["00:30Z", "01:30Z"]  # 25th 02:30 CEST, 26th 02:30 CET
    assert walk(in_hour_2, "2026-10-24T23:00+00:00", 4) == ["00:00Z", "00:20Z", "00:40Z", "01:00Z"]
    # spring: the missing 02:30 fires at 03:30 CEST; 02:00, 02:20, 02:40 at 03:00, 03:20, 03:40
    assert walk(nightly, "2026-03-28T12:00+00:00", 2) == ["01:30Z", "00:30Z"]
    assert walk(in_hour_2, "2026-03-28T23:00+00:00", 3) == ["01:00Z", "01:20Z", "01:40Z"]


def test_started_in_the_repeated_hour_the_job_trigger_only_looks_forward() -> None:
    """The freeze: a trigger asked from 02:05 CET (the second pass) answered 02:15
    CEST, an hour in the past, and APScheduler asked again and again. Here the
    job's trigger, jitter and all, answers after ``now`` however it is asked."""
    schedule = parse_schedule(None, "*/15 * * * *", "Europe/Berlin")
    assert schedule.trigger is not None
    now = datetime(2026, 10, 25, 1, 5, tzinfo=UTC)
    job = schedule.trigger.with_jitter_on(2.0, ManualClock())  # type: ignore[attr-defined]
    fire = job.get_next_fire_time(None, now)
    assert now < fire < now + timedelta(minutes=10, seconds=2)
    for _ in range(8):  # as APScheduler does after each run: from the last fire time
        following = job.get_next_fire_time(fire, fire)
        assert fire < following <= fire + timedelta(minutes=15, seconds=2)
        fire = following
