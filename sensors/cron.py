"""Classic cron, where APScheduler 3 reads an expression differently.

A sensor's ``cron`` is five fields (``minute hour day-of-month month day-of-week``).
APScheduler's ``CronTrigger`` (built in ``sensors.runner``) reads the first four as
written (``*``, lists, ranges, steps, month names) and does all the date arithmetic,
time zones and daylight-saving changes included. What it does differently from
classic cron is kept here:

* day-of-week numbers: 0 and 7 are Sunday, where APScheduler 3 counts 0 = Monday,
  so the field is read here and handed on as day names (``1-5`` → ``mon,…,fri``);
* when both day-of-month and day-of-week are restricted, a day matching *either*
  one matches (APScheduler wants both): the expression becomes two triggers;
* the macros ``@hourly @daily @weekly @monthly @yearly``.
"""

from __future__ import annotations

_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
FIELDS = ("minute", "hour", "day", "month", "day_of_week")  # CronTrigger's names, in crontab order


class CronError(ValueError):
    """The expression is not valid cron; the message says which field."""


def crontab_fields(text: str) -> list[dict[str, str]]:
    """``CronTrigger`` keyword arguments for ``text``: one set, or two (either one
    matches) when both day fields are restricted. Raises ``CronError`` for a wrong
    number of fields or a bad day of week; the other fields are checked by
    ``CronTrigger`` itself."""
    parts = _MACROS.get(text.strip().lower(), text).split()
    if len(parts) != len(FIELDS):
        raise CronError(f"expected 5 fields (minute hour day month weekday), got {len(parts)}")
    fields = dict(zip(FIELDS, parts, strict=True))
    fields["day_of_week"] = _weekdays(fields["day_of_week"])
    if fields["day"] != "*" and fields["day_of_week"] != "*":
        return [fields | {"day_of_week": "*"}, fields | {"day": "*"}]
    return [fields]


def _weekdays(text: str) -> str:
    """The day-of-week field as day names: ``*``, lists, ranges and steps over 0-7
    (0 and 7: Sunday) or ``sun``-``sat``."""
    if text == "*":
        return text
    days: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        if step_text and (not step_text.isdigit() or int(step_text) == 0):
            raise CronError(f"day of week: step {step_text!r} must be a positive number")
        if base == "*":
            start, end = 0, 7
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = _day(first), _day(last)
            if start > end:
                raise CronError(f"day of week: range {base!r} is backwards")
        else:
            start = _day(base)
            end = 7 if step_text else start
        days.update(day % 7 for day in range(start, end + 1, int(step_text or 1)))
    return ",".join(_DAY_NAMES[day] for day in sorted(days))


def _day(text: str) -> int:
    if text.lower() in _DAY_NAMES:
        return _DAY_NAMES.index(text.lower())
    if not text.isdigit():
        raise CronError(f"day of week: {text!r} is not a number")
    if int(text) > 7:
        raise CronError(f"day of week: {int(text)} is outside 0-7")
    return int(text)
