"""The SQL of the SQLite store's cost reports: ``cost_rollup`` and ``spend_since``.
Each adds the live runs and the runs of pruned tasks, kept by the hour (old days
folded into one row each) in ``cost_archive`` (``sqlite_retention``); an archived
hour or day counts whole when the window starts inside it.
"""

from __future__ import annotations

from vigil.store import CostGroup

# Pruned tasks' spend is in the archive, by hour or folded day (one counts whole, as
# in SQL_COST_ROLLUP: for a budget that errs on the side of spend).
SQL_SPEND_SINCE = """
SELECT (SELECT total(cost_usd) FROM runs WHERE finished_at >= :since)
     + (SELECT total(cost_usd) FROM cost_archive WHERE start_ms > :since - 86400000 AND start_ms + span_ms > :since)
     AS spent
"""

_COST_COLUMNS = """count(*) AS runs, count(DISTINCT r.task_id) AS tasks,
       total(r.cost_usd) AS cost_usd, total(r.api_cost_usd) AS api_cost_usd,
       total(r.tokens_in) AS tokens_in, total(r.tokens_out) AS tokens_out,
       total(r.cache_read_tokens) AS cache_read_tokens,
       total(r.cache_write_tokens) AS cache_write_tokens"""

# Every roll-up starts from the runs in the window (ix_runs_finished). CROSS JOIN
# keeps SQLite to that order: with ANALYZE statistics it otherwise prefers to walk
# every task by source (ix_tasks_source_created) to skip a sort, reading the whole
# history to report one day.
_LIVE_ROLLUP = {
    CostGroup.DAY: f"""SELECT strftime('%Y-%m-%d', r.finished_at / 1000, 'unixepoch') AS key,
        {_COST_COLUMNS} FROM runs r WHERE r.finished_at >= :since GROUP BY key""",
    CostGroup.HOUR: f"""SELECT strftime('%Y-%m-%dT%H', r.finished_at / 1000, 'unixepoch') AS key,
        {_COST_COLUMNS} FROM runs r WHERE r.finished_at >= :since GROUP BY key""",
    CostGroup.MODEL: f"""SELECT coalesce(r.model, '(none)') AS key, {_COST_COLUMNS}
        FROM runs r WHERE r.finished_at >= :since GROUP BY key""",
    CostGroup.SOURCE: f"""SELECT t.source AS key, {_COST_COLUMNS}
        FROM runs r CROSS JOIN tasks t ON t.id = r.task_id
        WHERE r.finished_at >= :since GROUP BY key""",
    CostGroup.SKILL: f"""SELECT coalesce(s.value, '(none)') AS key, {_COST_COLUMNS}
        FROM runs r CROSS JOIN tasks t ON t.id = r.task_id LEFT JOIN json_each(t.skills) s
        WHERE r.finished_at >= :since GROUP BY 1""",  # not "key": json_each has a column of that name
    # Each run counts for the sensor at the root of its task's parent chain, so the
    # follow-ups an agent added while working on a sensor's task count for that sensor.
    CostGroup.SENSOR: f"""WITH RECURSIVE chain(task_id, parent_id, source) AS (
            SELECT DISTINCT t.id, t.parent_id, t.source FROM runs r CROSS JOIN tasks t ON t.id = r.task_id
            WHERE r.finished_at >= :since
            UNION ALL
            SELECT c.task_id, p.parent_id, p.source FROM chain c JOIN tasks p ON p.id = c.parent_id
        ),
        origin(task_id, key) AS (
            SELECT task_id, CASE WHEN source LIKE 'sensor:%' THEN substr(source, 8) ELSE '(none)' END
            FROM chain WHERE parent_id IS NULL
        )
        SELECT coalesce(o.key, '(none)') AS key, {_COST_COLUMNS}
        FROM runs r LEFT JOIN origin o ON o.task_id = r.task_id
        WHERE r.finished_at >= :since GROUP BY key""",
}


def _archived(key: str, tasks: str, joins: str = "") -> str:
    """The pruned runs' part of a roll-up (sqlite_schema V2): an archived hour, or
    a folded day, counts whole when :since falls inside it (PRIMARY KEY range on
    start_ms: no row starts more than a day before the rows it may count)."""
    return f"""SELECT {key} AS key, sum(a.runs) AS runs, sum(a.{tasks}) AS tasks,
        total(a.cost_usd) AS cost_usd, total(a.api_cost_usd) AS api_cost_usd,
        total(a.tokens_in) AS tokens_in, total(a.tokens_out) AS tokens_out,
        total(a.cache_read_tokens) AS cache_read_tokens, total(a.cache_write_tokens) AS cache_write_tokens
        FROM cost_archive a {joins}
        WHERE a.start_ms > :since - 86400000 AND a.start_ms + a.span_ms > :since GROUP BY 1"""


_ARCHIVED_ROLLUP = {
    CostGroup.DAY: _archived("strftime('%Y-%m-%d', a.start_ms / 1000, 'unixepoch')", "tasks_day"),
    # a folded day has no hours left: it is one key, the day's
    CostGroup.HOUR: _archived(
        "strftime(CASE a.span_ms WHEN 3600000 THEN '%Y-%m-%dT%H' ELSE '%Y-%m-%d' END, a.start_ms / 1000, 'unixepoch')",
        "tasks_hour",
    ),
    CostGroup.MODEL: _archived("a.model", "tasks_model"),
    CostGroup.SOURCE: _archived("a.source", "tasks_last"),
    CostGroup.SKILL: _archived("coalesce(s.value, '(none)')", "tasks_last", "LEFT JOIN json_each(a.skills) s"),
    CostGroup.SENSOR: _archived("a.sensor", "tasks_last"),
}


def _rollup(group: CostGroup) -> str:
    """Live runs and archived runs, summed per key. A task is either live or
    archived (prune takes all its runs), so adding the two task counts is exact."""
    order = "key DESC" if group is CostGroup.DAY or group is CostGroup.HOUR else "cost_usd DESC, key"
    return f"""SELECT key, sum(runs) AS runs, sum(tasks) AS tasks, total(cost_usd) AS cost_usd,
        total(api_cost_usd) AS api_cost_usd, total(tokens_in) AS tokens_in, total(tokens_out) AS tokens_out,
        total(cache_read_tokens) AS cache_read_tokens, total(cache_write_tokens) AS cache_write_tokens
    FROM (SELECT * FROM ({_LIVE_ROLLUP[group]}) UNION ALL SELECT * FROM ({_ARCHIVED_ROLLUP[group]}))
    GROUP BY key ORDER BY {order}"""


SQL_COST_ROLLUP: dict[CostGroup, str] = {group: _rollup(group) for group in CostGroup}
