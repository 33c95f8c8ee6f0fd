"""The SQL of the SQLite store's cost reports: ``cost_rollup``, built by
``portable.cost_rollup`` from SQLite's key expressions and joins (``spend_since`` is
portable as written). Each adds the live runs and the runs of pruned tasks, kept by
the hour (old days folded into one row each) in ``cost_archive``
(``sqlite_retention``); an archived hour or day counts whole when the window starts
inside it.
"""

from __future__ import annotations

from vigil.models import CostGroup
from vigil.store.portable import RUN_ACCOUNT, cost_rollup, origin_chain

# Each run counts for the sensor at the root of its task's parent chain, so the
# follow-ups an agent added while working on a sensor's task count for that sensor.
_ORIGIN = "WITH RECURSIVE " + origin_chain(
    "SELECT DISTINCT t.id, t.parent_id, t.source FROM runs r CROSS JOIN tasks t ON t.id = r.task_id "
    "WHERE r.finished_at >= :since"
)

# The live runs' part of a roll-up: (key expression, FROM and joins). Every roll-up
# starts from the runs in the window (ix_runs_finished). CROSS JOIN keeps SQLite to
# that order: with ANALYZE statistics it otherwise prefers to walk every task by
# source (ix_tasks_source_created) to skip a sort, reading the whole history to
# report one day.
_LIVE = {
    CostGroup.DAY: ("strftime('%Y-%m-%d', r.finished_at / 1000, 'unixepoch')", "runs r"),
    CostGroup.HOUR: ("strftime('%Y-%m-%dT%H', r.finished_at / 1000, 'unixepoch')", "runs r"),
    CostGroup.MODEL: ("coalesce(r.model, '(none)')", "runs r"),
    CostGroup.SOURCE: ("t.source", "runs r CROSS JOIN tasks t ON t.id = r.task_id"),
    CostGroup.SKILL: (
        "coalesce(s.value, '(none)')",
        "runs r CROSS JOIN tasks t ON t.id = r.task_id LEFT JOIN json_each(t.skills) s",
    ),
    CostGroup.SENSOR: ("coalesce(o.sensor, '(none)')", "runs r LEFT JOIN origin o ON o.task_id = r.task_id"),
    CostGroup.ACCOUNT: (RUN_ACCOUNT, "runs r"),
}
# The pruned runs' part (sqlite_schema V2, the account V7): (key expression, task count
# column, joins).
_ARCHIVED = {
    CostGroup.DAY: ("strftime('%Y-%m-%d', a.start_ms / 1000, 'unixepoch')", "tasks_day", ""),
    # a folded day has no hours left: it is one key, the day's
    CostGroup.HOUR: (
        "strftime(CASE a.span_ms WHEN 3600000 THEN '%Y-%m-%dT%H' ELSE '%Y-%m-%d' END, a.start_ms / 1000, 'unixepoch')",
        "tasks_hour",
        "",
    ),
    CostGroup.MODEL: ("a.model", "tasks_model", ""),
    CostGroup.SOURCE: ("a.source", "tasks_last", ""),
    CostGroup.SKILL: ("coalesce(s.value, '(none)')", "tasks_last", "LEFT JOIN json_each(a.skills) s"),
    CostGroup.SENSOR: ("a.sensor", "tasks_last", ""),
    CostGroup.ACCOUNT: ("a.account", "tasks_account", ""),
}

SQL_COST_ROLLUP: dict[CostGroup, str] = {
    group: cost_rollup(
        _LIVE[group],
        _ARCHIVED[group],
        by_time=group in (CostGroup.DAY, CostGroup.HOUR),
        with_sql=_ORIGIN if group is CostGroup.SENSOR else "",
    )
    for group in CostGroup
}
