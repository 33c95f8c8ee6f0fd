"""The SQL of the PostgreSQL store's cost reports: ``cost_rollup`` and
``spend_since``. Each adds the live runs and the runs of pruned tasks, kept by the
hour (old days folded into one row each) in ``cost_archive`` (``postgres_retention``);
an archived hour or day counts whole when the window starts inside it, as on SQLite.
"""

from __future__ import annotations

from vigil.store import CostGroup

# Pruned tasks' spend is in the archive, by hour or folded day (one counts whole, as
# in SQL_COST_ROLLUP: for a budget that errs on the side of spend).
SQL_SPEND_SINCE = """
SELECT ((SELECT coalesce(sum(cost_usd), 0) FROM runs WHERE finished_at >= %(since)s)
        + (SELECT coalesce(sum(cost_usd), 0) FROM cost_archive
           WHERE start_ms > %(since)s - 86400000 AND start_ms + span_ms > %(since)s))::float8 AS spent
"""

_COST_COLUMNS = """count(*) AS runs, count(DISTINCT r.task_id) AS tasks,
       sum(r.cost_usd) AS cost_usd, sum(r.api_cost_usd) AS api_cost_usd,
       sum(r.tokens_in) AS tokens_in, sum(r.tokens_out) AS tokens_out,
       sum(r.cache_read_tokens) AS cache_read_tokens, sum(r.cache_write_tokens) AS cache_write_tokens"""


def _utc(epoch_ms: str, pattern: str) -> str:
    return f"to_char(to_timestamp({epoch_ms} / 1000) AT TIME ZONE 'UTC', '{pattern}')"


_DAY, _HOUR = "YYYY-MM-DD", 'YYYY-MM-DD"T"HH24'
_SKILLS_OF = "LEFT JOIN LATERAL jsonb_array_elements_text({0}.skills) AS s (value) ON true"

# Each run counts for the sensor at the root of its task's parent chain.
_ORIGIN = """WITH RECURSIVE chain(task_id, parent_id, source) AS (
    SELECT DISTINCT t.id, t.parent_id, t.source FROM runs r JOIN tasks t ON t.id = r.task_id
    WHERE r.finished_at >= %(since)s
    UNION ALL
    SELECT c.task_id, p.parent_id, p.source FROM chain c JOIN tasks p ON p.id = c.parent_id
),
origin(task_id, key) AS (
    SELECT task_id, CASE WHEN source LIKE 'sensor:%%' THEN substr(source, 8) ELSE '(none)' END
    FROM chain WHERE parent_id IS NULL
)
"""

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
    CostGroup.SENSOR: ("coalesce(o.key, '(none)')", "runs r LEFT JOIN origin o ON o.task_id = r.task_id"),
}
# The pruned runs' part (postgres_schema V2): (key expression, task count column, joins).
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
}


def _rollup(group: CostGroup) -> str:
    """Live and archived runs summed per key (a task is either live or archived:
    prune takes all its runs). An archived hour or folded day counts whole when
    %(since)s falls inside it. Keys sort bytewise (COLLATE "C"), as on SQLite, whatever the locale."""
    live_key, live_from = _LIVE[group]
    archived_key, tasks, joins = _ARCHIVED[group]
    by_time = group in (CostGroup.DAY, CostGroup.HOUR)
    order = 'key COLLATE "C" DESC' if by_time else 'cost_usd DESC, key COLLATE "C"'
    return f"""{_ORIGIN if group is CostGroup.SENSOR else ""}
SELECT key, sum(runs)::bigint AS runs, sum(tasks)::bigint AS tasks,
       coalesce(sum(cost_usd), 0)::float8 AS cost_usd, coalesce(sum(api_cost_usd), 0)::float8 AS api_cost_usd,
       coalesce(sum(tokens_in), 0)::bigint AS tokens_in, coalesce(sum(tokens_out), 0)::bigint AS tokens_out,
       coalesce(sum(cache_read_tokens), 0)::bigint AS cache_read_tokens,
       coalesce(sum(cache_write_tokens), 0)::bigint AS cache_write_tokens
FROM (
    SELECT {live_key} AS key, {_COST_COLUMNS} FROM {live_from} WHERE r.finished_at >= %(since)s GROUP BY 1
    UNION ALL
    SELECT {archived_key} AS key, sum(a.runs) AS runs, sum(a.{tasks}) AS tasks,
           sum(a.cost_usd) AS cost_usd, sum(a.api_cost_usd) AS api_cost_usd,
           sum(a.tokens_in) AS tokens_in, sum(a.tokens_out) AS tokens_out,
           sum(a.cache_read_tokens) AS cache_read_tokens, sum(a.cache_write_tokens) AS cache_write_tokens
    FROM cost_archive a {joins}
    WHERE a.start_ms > %(since)s - 86400000 AND a.start_ms + a.span_ms > %(since)s GROUP BY 1
) AS u
GROUP BY key ORDER BY {order}"""


SQL_COST_ROLLUP: dict[CostGroup, str] = {group: _rollup(group) for group in CostGroup}
