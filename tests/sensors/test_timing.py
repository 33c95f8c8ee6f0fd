"""Schedules, cron and back-off, computed from the persisted last run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sensors.cron import CronError, crontab_fields
from sensors.runner import parse_schedule
from sensors.timing import Schedule, backoff_ms, next_due

MIN = 60_000
HOUR = 60 * MIN


def parse_cron(text: str) -> Schedule:
    return parse_schedule(None, text)


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M %a")


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("*/15 * * * *", "2026-03-02 10:07", "2026-03-02 10:15 Mon"),
        ("0 9 * * *", "2026-03-02 09:00", "2026-03-03 09:00 Tue"),  # strictly after
        ("0 9 * * 1-5", "2026-03-06 10:00", "2026-03-09 09:00 Mon"),  # skips the weekend
        ("30 8 1 * *", "2026-01-31 12:00", "2026-02-01 08:30 Sun"),
        ("0 0 29 2 *", "2026-03-01 00:00", "2028-02-29 00:00 Tue"),
        ("0 12 * * sun", "2026-03-02 00:00", "2026-03-08 12:00 Sun"),
        ("0 12 * * 7", "2026-03-02 00:00", "2026-03-08 12:00 Sun"),
        ("0 0 13 * 5", "2026-03-02 00:00", "2026-03-06 00:00 Fri"),  # day OR weekday
        ("@hourly", "2026-03-02 10:59", "2026-03-02 11:00 Mon"),
    ],
)
def test_cron_next_after(expr: str, after: str, expected: str) -> None:
    assert iso(parse_cron(expr).next_after(ms(after))) == expected


def test_cron_at_or_before_is_the_mirror_of_next_after() -> None:
    cron = parse_cron("0 9 * * 1-5")
    assert iso(cron.occurrence_at_or_before(ms("2026-03-09 08:59"))) == "2026-03-06 09:00 Fri"
    assert iso(cron.occurrence_at_or_before(ms("2026-03-09 09:00"))) == "2026-03-09 09:00 Mon"
    yearly = parse_cron("@yearly")  # far back: the search reaches further each time
    assert iso(yearly.occurrence_at_or_before(ms("2026-12-31 23:59"))) == "2026-01-01 00:00 Thu"


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("* * * *", "expected 5 fields"),
        ("61 * * * *", r"minute '61': the last value \(61\) is higher than the maximum value \(59\)"),
        ("* * * foo *", "month 'foo': Invalid month name"),
        ("*/0 * * * *", "minute '\\*/0': Increment must be higher than 0"),
        ("5-1 * * * *", "minute '5-1': The minimum value in a range must not be higher than the maximum"),
        ("* * * * 8", "day of week: 8 is outside 0-7"),
        ("* * * * */0", "day of week: step '0' must be a positive number"),
        ("* * * * fri-mon", "day of week: range 'fri-mon' is backwards"),
        ("0 0 30 2 *", "never matches"),
    ],
)
def test_bad_cron_names_the_field(expr: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        parse_cron(expr)
    assert str(caught.value).startswith(f"cron {expr!r}: ")


def test_classic_weekday_numbers_become_names_for_apscheduler() -> None:
    """APScheduler 3 counts weekdays from Monday; classic cron from Sunday (0 and 7)."""
    assert crontab_fields("0 9 * * 1-5")[0]["day_of_week"] == "mon,tue,wed,thu,fri"
    assert crontab_fields("0 9 * * */2")[0]["day_of_week"] == "sun,tue,thu,sat"
    assert crontab_fields("0 9 * * 5-7")[0]["day_of_week"] == "sun,fri,sat"
    assert crontab_fields("0 9 * * SAT,sun")[0]["day_of_week"] == "sun,sat"
    # both day fields restricted: either one (two triggers)
    assert [f["day"] + " " + f["day_of_week"] for f in crontab_fields("0 0 13 * 5")] == ["13 *", "* fri"]
    with pytest.raises(CronError, match="day of week: 'someday' is not a number"):
        crontab_fields("* * * * someday")


def test_cron_in_a_time_zone() -> None:
    schedule = parse_schedule(None, "0 9 * * *", "Europe/Paris")
    # 09:00 in Paris in winter is 08:00 UTC
    assert iso(schedule.next_after(ms("2026-01-05 00:00"))) == "2026-01-05 08:00 Mon"


def test_parse_schedule_errors() -> None:
    with pytest.raises(ValueError, match="not both"):
        parse_schedule("1m", "* * * * *")
    with pytest.raises(ValueError, match="every: invalid duration"):
        parse_schedule("soon", None)
    with pytest.raises(ValueError, match="no schedule"):
        parse_schedule(None, None)
    with pytest.raises(ValueError, match="unknown time zone"):
        parse_schedule(None, "* * * * *", "Mars/Olympus")


def test_every_backs_off_by_doubling_up_to_the_cap_and_success_resets() -> None:
    every = Schedule(every_ms=MIN)
    delays = [backoff_ms(every, n, 10 * MIN, 0) for n in range(6)]
    assert delays == [MIN, 2 * MIN, 4 * MIN, 8 * MIN, 10 * MIN, 10 * MIN]
    assert backoff_ms(every, 1000, 10 * MIN, 0) == 10 * MIN  # no overflow
    # an interval longer than the cap is never shortened
    assert backoff_ms(Schedule(every_ms=2 * HOUR), 3, HOUR, 0) == 2 * HOUR


def test_cron_backs_off_by_skipping_occurrences() -> None:
    cron = parse_schedule(None, "*/5 * * * *")
    start = ms("2026-03-02 10:00")
    assert iso(next_due(cron, start, 0, HOUR, start)) == "2026-03-02 10:05 Mon"
    assert iso(next_due(cron, start, 1, HOUR, start)) == "2026-03-02 10:10 Mon"
    assert iso(next_due(cron, start, 2, HOUR, start)) == "2026-03-02 10:20 Mon"
    assert iso(next_due(cron, start, 20, HOUR, start)) == "2026-03-02 11:05 Mon"  # capped


def test_next_due_comes_from_the_last_run() -> None:
    every = Schedule(every_ms=5 * MIN)
    assert next_due(every, None, 0, HOUR, 1_000) == 1_000  # never ran: due now
    assert next_due(every, 1_000, 0, HOUR, 9_999_999) == 1_000 + 5 * MIN
    assert next_due(every, 1_000, 2, HOUR, 0) == 1_000 + 20 * MIN


def test_every_occurrences_are_aligned_to_the_epoch() -> None:
    hourly = Schedule(every_ms=HOUR)
    assert iso(hourly.occurrence_at_or_before(ms("2026-03-02 10:59"))) == "2026-03-02 10:00 Mon"


def _matches(cron_text: str, moment: datetime) -> bool:
    """Brute-force reading of a cron expression, field by field (the oracle)."""
    fields = cron_text.split()

    def hit(field: str, value: int, low: int) -> bool:
        for part in field.split(","):
            base, _, step = part.partition("/")
            start, end = (low, 10**6) if base == "*" else (int(base.split("-")[0]), int(base.split("-")[-1]))
            if base != "*" and "-" not in base and step:
                end = 10**6
            if start <= value <= end and (value - start) % int(step or 1) == 0:
                return True
        return False

    dom = hit(fields[2], moment.day, 1)
    dow = hit(fields[4], moment.isoweekday() % 7, 0) or (moment.isoweekday() == 7 and hit(fields[4], 7, 0))
    day = (dom and dow) if "*" in (fields[2], fields[4]) else (dom or dow)
    return (
        hit(fields[0], moment.minute, 0) and hit(fields[1], moment.hour, 0) and hit(fields[3], moment.month, 1) and day
    )


field_part = st.one_of(
    st.just("*"),
    st.builds(lambda s: f"*/{s}", st.integers(1, 7)),
    st.integers(0, 5).map(str),
    st.builds(lambda a, n: f"{a}-{a + n}", st.integers(0, 3), st.integers(0, 3)),
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    minute=st.one_of(field_part, st.integers(0, 59).map(str)),
    hour=st.one_of(st.just("*"), st.integers(0, 23).map(str), st.just("*/3")),
    dom=st.one_of(st.just("*"), st.just("1-15"), st.just("*/2")),
    dow=st.one_of(st.just("*"), st.just("1-5"), st.just("0"), st.just("6,7")),
    start=st.integers(ms("2026-01-01 00:00"), ms("2026-12-31 00:00")),
)
def test_cron_agrees_with_a_brute_force_search(minute: str, hour: str, dom: str, dow: str, start: int) -> None:
    text = f"{minute} {hour} {dom} * {dow}"
    cron = parse_cron(text)
    base = datetime.fromtimestamp(start / 1000, tz=UTC).replace(second=0, microsecond=0)
    window = 3 * 24 * 60
    forward = next(
        (base + timedelta(minutes=i) for i in range(1, window) if _matches(text, base + timedelta(minutes=i))), None
    )
    if forward is not None:
        assert cron.next_after(start) == int(forward.timestamp() * 1000)
    else:
        assert cron.next_after(start) >= int((base + timedelta(minutes=window)).timestamp() * 1000)
    backward = next(
        (base - timedelta(minutes=i) for i in range(window) if _matches(text, base - timedelta(minutes=i))), None
    )
    if backward is not None:
        assert cron.occurrence_at_or_before(start) == int(backward.timestamp() * 1000)
