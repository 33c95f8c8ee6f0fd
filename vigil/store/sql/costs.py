"""The SQL of spend: the budget's ``SPEND_SINCE`` and the cost reports
(``COST_ROLLUP``, one statement per grouping). Each adds the live runs and the runs
of pruned tasks, kept by the hour (old days folded into one row each) in
``cost_archive`` (``retention``); an archived hour or day counts whole when the
window starts inside it.

A roll-up's shape is shared; its pieces (a key's expression, the joins that reach
it) are each backend's, side by side in ``_LIVE`` and ``_ARCHIVED``.
"""

from __future__ import annotations

from vigil.models import CostGroup
from vigil.store.transaction import Sql

# A run's key in the account roll-up, live and archived: "executor:account", or
# "(none)" when either is missing (``r`` is the run).
RUN_ACCOUNT = "coalesce(r.executor || ':' || r.account, '(none)')"


def origin_chain(roots: str) -> str:
    """The CTEs ``chain`` and ``origin(task_id, sensor)`` (after ``WITH RECURSIVE``):
    for each task ``roots`` selects (``id, parent_id, source`` of ``tasks t``), the
    sensor at the root of its parent chain ("feeds" for a follow-up of a follow-up
    of a ``sensor:feeds`` task; ``(none)`` when the root is not a sensor's)."""
    return f"""chain(task_id, parent_id, source) AS (
    {roots}
    UNION ALL
    SELECT c.task_id, p.parent_id, p.source FROM chain c JOIN tasks p ON p.id = c.parent_id
),
origin(task_id, sensor) AS (
    SELECT task_id, CASE WHEN source LIKE 'sensor:%' THEN substr(source, 8) ELSE '(none)' END
    FROM chain WHERE parent_id IS NULL
)"""


# Pruned tasks' spend is in the archive, by hour or folded day (one counts whole, as
# in the roll-ups: for a budget that errs on the side of spend).
SPEND_SINCE = Sql("""
SELECT CAST((SELECT coalesce(sum(cost_usd), 0) FROM runs WHERE finished_at >= :since)
            + (SELECT coalesce(sum(cost_usd), 0) FROM cost_archive
               WHERE start_ms > :since - 86400000 AND start_ms + span_ms > :since) AS double precision) AS spent
""")


def _cost_rollup(
    live: tuple[str, str], archived: tuple[str, str, str], *, by_time: bool, with_sql: str = "", collate: str = ""
) -> str:
    """One roll-up from a backend's pieces: ``live`` is the key expression over the
    runs and their FROM (``r`` is the run), ``archived`` the key expression over
    ``cost_archive a``, its task-count column and any joins; ``with_sql`` a WITH
    clause the live FROM uses; ``collate`` the sort order of keys.

    Live and archived runs are summed per key (a task is either live or archived:
    prune takes all its runs, so adding the two task counts is exact). An archived
    hour, or a folded day, counts whole when :since falls inside it (no archive row
    starts more than a day before the runs it may count). Newest key first by time,
    else the dearest first."""
    live_key, live_from = live
    archived_key, tasks, joins = archived
    order = f"key{collate} DESC" if by_time else f"cost_usd DESC, key{collate}"
    # GROUP BY 1, not key: SQLite's json_each (the skills) has a column of that name.
    return f"""{with_sql}
SELECT key, CAST(sum(runs) AS bigint) AS runs, CAST(sum(tasks) AS bigint) AS tasks,
       CAST(coalesce(sum(cost_usd), 0) AS double precision) AS cost_usd,
       CAST(coalesce(sum(api_cost_usd), 0) AS double precision) AS api_cost_usd,
       CAST(coalesce(sum(tokens_in), 0) AS bigint) AS tokens_in,
       CAST(coalesce(sum(tokens_out), 0) AS bigint) AS tokens_out,
       CAST(coalesce(sum(cache_read_tokens), 0) AS bigint) AS cache_read_tokens,
       CAST(coalesce(sum(cache_write_tokens), 0) AS bigint) AS cache_write_tokens
FROM (
    SELECT {live_key} AS key, count(*) AS runs, count(DISTINCT r.task_id) AS tasks,
           sum(r.cost_usd) AS cost_usd, sum(r.api_cost_usd) AS api_cost_usd,
           sum(r.tokens_in) AS tokens_in, sum(r.tokens_out) AS tokens_out,
           sum(r.cache_read_tokens) AS cache_read_tokens, sum(r.cache_write_tokens) AS cache_write_tokens
    FROM {live_from} WHERE r.finished_at >= :since GROUP BY 1
    UNION ALL
    SELECT {archived_key} AS key, sum(a.runs) AS runs, sum(a.{tasks}) AS tasks,
           sum(a.cost_usd) AS cost_usd, sum(a.api_cost_usd) AS api_cost_usd,
           sum(a.tokens_in) AS tokens_in, sum(a.tokens_out) AS tokens_out,
           sum(a.cache_read_tokens) AS cache_read_tokens, sum(a.cache_write_tokens) AS cache_write_tokens
    FROM cost_archive a {joins}
    WHERE a.start_ms > :since - 86400000 AND a.start_ms + a.span_ms > :since GROUP BY 1
) AS u
GROUP BY key ORDER BY {order}"""


def _utc(epoch_ms: str, pattern: str) -> str:
    """PostgreSQL: ``epoch_ms`` as UTC text in ``pattern``."""
    return f"to_char(to_timestamp({epoch_ms} / 1000) AT TIME ZONE 'UTC', '{pattern}')"


_DAY, _HOUR = "YYYY-MM-DD", 'YYYY-MM-DD"T"HH24'
_SKILLS_OF = "LEFT JOIN LATERAL jsonb_array_elements_text({0}.skills) AS s (value) ON true"

# Each run counts for the sensor at the root of its task's parent chain, so the
# follow-ups an agent added while working on a sensor's task count for that sensor.
# SQLite's CROSS JOIN keeps it to the runs-first order (below).
_ORIGIN = {
    "sqlite": "WITH RECURSIVE "
    + origin_chain(
        "SELECT DISTINCT t.id, t.parent_id, t.source FROM runs r CROSS JOIN tasks t ON t.id = r.task_id "
        "WHERE r.finished_at >= :since"
    ),
    "postgres": "WITH RECURSIVE "
    + origin_chain(
        "SELECT DISTINCT t.id, t.parent_id, t.source FROM runs r JOIN tasks t ON t.id = r.task_id "
        "WHERE r.finished_at >= :since"
    ),
}

# The live runs' part of a roll-up: (key expression, FROM and joins), SQLite's then
# PostgreSQL's. Every roll-up starts from the runs in the window (ix_runs_finished).
# SQLite's CROSS JOIN keeps it to that order: with ANALYZE statistics it otherwise
# prefers to walk every task by source (ix_tasks_source_created) to skip a sort,
# reading the whole history to report one day.
_LIVE: dict[CostGroup, tuple[tuple[str, str], tuple[str, str]]] = {
    CostGroup.DAY: (
        ("strftime('%Y-%m-%d', r.finished_at / 1000, 'unixepoch')", "runs r"),
        (_utc("r.finished_at", _DAY), "runs r"),
    ),
    CostGroup.HOUR: (
        ("strftime('%Y-%m-%dT%H', r.finished_at / 1000, 'unixepoch')", "runs r"),
        (_utc("r.finished_at", _HOUR), "runs r"),
    ),
    CostGroup.MODEL: (("coalesce(r.model, '(none)')", "runs r"), ("coalesce(r.model, '(none)')", "runs r")),
    CostGroup.SOURCE: (
        ("t.source", "runs r CROSS JOIN tasks t ON t.id = r.task_id"),
        ("t.source", "runs r JOIN tasks t ON t.id = r.task_id"),
    ),
    CostGroup.SKILL: (
        (
            "coalesce(s.value, '(none)')",
            "runs r CROSS JOIN tasks t ON t.id = r.task_id LEFT JOIN json_each(t.skills) s",
        ),
        ("coalesce(s.value, '(none)')", "runs r JOIN tasks t ON t.id = r.task_id " + _SKILLS_OF.format("t")),
    ),
    CostGroup.SENSOR: (
        ("coalesce(o.sensor, '(none)')", "runs r LEFT JOIN origin o ON o.task_id = r.task_id"),
        ("coalesce(o.sensor, '(none)')", "runs r LEFT JOIN origin o ON o.task_id = r.task_id"),
    ),
    CostGroup.ACCOUNT: ((RUN_ACCOUNT, "runs r"), (RUN_ACCOUNT, "runs r")),
}
# The pruned runs' part (schema V2; the account: SQLite V7, PostgreSQL V9): (key
# expression, task count column, joins), SQLite's then PostgreSQL's. A folded day has
# no hours left: it is one key, the day's.
_ARCHIVED: dict[CostGroup, tuple[tuple[str, str, str], tuple[str, str, str]]] = {
    CostGroup.DAY: (
        ("strftime('%Y-%m-%d', a.start_ms / 1000, 'unixepoch')", "tasks_day", ""),
        (_utc("a.start_ms", _DAY), "tasks_day", ""),
    ),
    CostGroup.HOUR: (
        (
            "strftime(CASE a.span_ms WHEN 3600000 THEN '%Y-%m-%dT%H' ELSE '%Y-%m-%d' END,"
            " a.start_ms / 1000, 'unixepoch')",
            "tasks_hour",
            "",
        ),
        (
            f"CASE a.span_ms WHEN 3600000 THEN {_utc('a.start_ms', _HOUR)} ELSE {_utc('a.start_ms', _DAY)} END",
            "tasks_hour",
            "",
        ),
    ),
    CostGroup.MODEL: (("a.model", "tasks_model", ""), ("a.model", "tasks_model", "")),
    CostGroup.SOURCE: (("a.source", "tasks_last", ""), ("a.source", "tasks_last", "")),
    CostGroup.SKILL: (
        ("coalesce(s.value, '(none)')", "tasks_last", "LEFT JOIN json_each(a.skills) s"),
        ("coalesce(s.value, '(none)')", "tasks_last", _SKILLS_OF.format("a")),
    ),
    CostGroup.SENSOR: (("a.sensor", "tasks_last", ""), ("a.sensor", "tasks_last", "")),
    CostGroup.ACCOUNT: (("a.account", "tasks_account", ""), ("a.account", "tasks_account", "")),
}


def _rollup(group: CostGroup) -> Sql:
    by_time = group in (CostGroup.DAY, CostGroup.HOUR)
    with_origin = group is CostGroup.SENSOR
    (live_sqlite, live_postgres), (archived_sqlite, archived_postgres) = _LIVE[group], _ARCHIVED[group]
    return Sql(
        sqlite=_cost_rollup(
            live_sqlite, archived_sqlite, by_time=by_time, with_sql=_ORIGIN["sqlite"] if with_origin else ""
        ),
        # keys sort bytewise (COLLATE "C"), as on SQLite, whatever the database's locale
        postgres=_cost_rollup(
            live_postgres,
            archived_postgres,
            by_time=by_time,
            with_sql=_ORIGIN["postgres"] if with_origin else "",
            collate=' COLLATE "C"',
        ),
    )


COST_ROLLUP: dict[CostGroup, Sql] = {group: _rollup(group) for group in CostGroup}
