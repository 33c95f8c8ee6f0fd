"""The SQL of the PostgreSQL store's cost reports: ``cost_rollup``, built by
``portable.cost_rollup`` from PostgreSQL's key expressions and joins and rewritten
to psycopg's style (``spend_since`` is portable as written). Each adds the live
runs and the runs of pruned tasks, kept by the hour (old days folded into one row
each) in ``cost_archive`` (``postgres_retention``); an archived hour or day counts
whole when the window starts inside it, as on SQLite.
"""

from __future__ import annotations

from vigil.models import CostGroup
from vigil.store.portable import RUN_ACCOUNT, cost_rollup, dialect, origin_chain


def _utc(epoch_ms: str, pattern: str) -> str:
    return f"to_char(to_timestamp({epoch_ms} / 1000) AT TIME ZONE 'UTC', '{pattern}')"


_DAY, _HOUR = "YYYY-MM-DD", 'YYYY-MM-DD"T"HH24'
_SKILLS_OF = "LEFT JOIN LATERAL jsonb_array_elements_text({0}.skills) AS s (value) ON true"

# Each run counts for the sensor at the root of its task's parent chain.
_ORIGIN = "WITH RECURSIVE " + origin_chain(
    "SELECT DISTINCT t.id, t.parent_id, t.source FROM runs r JOIN tasks t ON t.id = r.task_id "
    "WHERE r.finished_at >= :since"
)

# The live runs' part of a roll-up: (key expression, FROM and joins).
_LIVE = {
    CostGroup.DAY: (_utc("r.finished_at", _DAY), "runs r"),
    CostGroup.HOUR: (_utc("r.finished_at", _HOUR), "runs r"),
    CostGroup.MODEL: ("coalesce(r.model, '(none)')", "runs r"),
    CostGroup.SOURCE: ("t.source", "runs r JOIN tasks t ON t.id = r.task_id"),
    CostGroup.SKILL: (
        "coalesce(s.value, '(none)')",
        "runs r JOIN tasks t ON t.id = r.task_id " + _SKILLS_OF.format("t"),
    ),
    CostGroup.SENSOR: ("coalesce(o.sensor, '(none)')", "runs r LEFT JOIN origin o ON o.task_id = r.task_id"),
    CostGroup.ACCOUNT: (RUN_ACCOUNT, "runs r"),
}
# The pruned runs' part (postgres_schema V2, the account V9): (key expression, task count
# column, joins).
_ARCHIVED = {
    CostGroup.DAY: (_utc("a.start_ms", _DAY), "tasks_day", ""),
    # a folded day has no hours left: it is one key, the day's
    CostGroup.HOUR: (
        f"CASE a.span_ms WHEN 3600000 THEN {_utc('a.start_ms', _HOUR)} ELSE {_utc('a.start_ms', _DAY)} END",
        "tasks_hour",
        "",
    ),
    CostGroup.MODEL: ("a.model", "tasks_model", ""),
    CostGroup.SOURCE: ("a.source", "tasks_last", ""),
    CostGroup.SKILL: ("coalesce(s.value, '(none)')", "tasks_last", _SKILLS_OF.format("a")),
    CostGroup.SENSOR: ("a.sensor", "tasks_last", ""),
    CostGroup.ACCOUNT: ("a.account", "tasks_account", ""),
}

# Keys sort bytewise (COLLATE "C"), as on SQLite, whatever the database's locale.
SQL_COST_ROLLUP: dict[CostGroup, str] = {
    group: dialect(
        cost_rollup(
            _LIVE[group],
            _ARCHIVED[group],
            by_time=group in (CostGroup.DAY, CostGroup.HOUR),
            with_sql=_ORIGIN if group is CostGroup.SENSOR else "",
            collate=' COLLATE "C"',
        )
    )
    for group in CostGroup
}
