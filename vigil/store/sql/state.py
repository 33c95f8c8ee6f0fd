"""The SQL of sensors' state and the loop's key/value state (``loop_state``, JSON
values: text on SQLite, ``jsonb`` on PostgreSQL).

Parameters are ``:name`` on both backends (``vigil.store.transaction.Sql``); ``now``
is the store clock's epoch ms.
"""

from __future__ import annotations

from vigil.store.transaction import Sql

SENSOR_STATES = Sql(
    sqlite="SELECT * FROM sensor_state ORDER BY name",
    postgres='SELECT * FROM sensor_state ORDER BY name COLLATE "C"',
)

SENSOR_STATE = Sql("SELECT * FROM sensor_state WHERE name = :name")


def _sensor_run(state: str) -> str:
    """``state`` is the :state parameter as the backend's JSON column takes it."""
    return f"""
INSERT INTO sensor_state (name, last_run_at, last_duration_ms, last_status, last_error,
                          consecutive_failures, created_last, ignored_last, dropped_last,
                          rejected_last, next_due_at, state)
VALUES (:name, :started_at, :duration_ms, :status, :error, :failures, :created, :ignored,
        :dropped, :rejected, :next_due_at, coalesce({state}, '{{}}'))
ON CONFLICT (name) DO UPDATE SET
    last_run_at = excluded.last_run_at, last_duration_ms = excluded.last_duration_ms,
    last_status = excluded.last_status, last_error = excluded.last_error,
    consecutive_failures = excluded.consecutive_failures, created_last = excluded.created_last,
    ignored_last = excluded.ignored_last, dropped_last = excluded.dropped_last,
    rejected_last = excluded.rejected_last,
    next_due_at = excluded.next_due_at, state = coalesce({state}, sensor_state.state)
"""


# A sensor's run upserted into its row (:state NULL keeps the saved state).
RECORD_SENSOR_RUN = Sql(sqlite=_sensor_run(":state"), postgres=_sensor_run(":state::jsonb"))

# Locked on PostgreSQL: two processes recording a skip of one sensor merge them one
# after the other (on SQLite BEGIN IMMEDIATE already serialises the read and the write).
SENSOR_SKIPS = Sql(
    sqlite="SELECT skips, last_run_at FROM sensor_state WHERE name = :name",
    postgres="SELECT skips, last_run_at FROM sensor_state WHERE name = :name FOR UPDATE",
)


def _sensor_skips(skips: str) -> str:
    return f"""
INSERT INTO sensor_state (name, skips) VALUES (:name, {skips})
ON CONFLICT (name) DO UPDATE SET skips = excluded.skips
"""


# A sensor's skipped runs written into its row.
SET_SENSOR_SKIPS = Sql(sqlite=_sensor_skips(":skips"), postgres=_sensor_skips(":skips::jsonb"))

SET_SENSOR_ENABLED = Sql("""
INSERT INTO sensor_state (name, enabled) VALUES (:name, :enabled)
ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled
""")

LOOP_VALUES = Sql("SELECT key, value FROM loop_state")

LOOP_VALUE = Sql("SELECT value FROM loop_state WHERE key = :key")

SET_LOOP_VALUE = Sql("""
INSERT INTO loop_state (key, value) VALUES (:key, :value) ON CONFLICT (key) DO UPDATE SET value = excluded.value
""")

# PostgreSQL's compare-and-set (``PgEngine.replace_loop_value``): written only over
# the expected value (compared as JSON), in the one statement. SQLite's engine reads
# (LOOP_VALUE), compares in Python and writes (SET_LOOP_VALUE) under BEGIN IMMEDIATE.
REPLACE_LOOP_VALUE = Sql(
    sqlite=None,
    postgres="""
UPDATE loop_state SET value = :value::jsonb WHERE key = :key AND value = :expected::jsonb RETURNING 1
""",
)
# Expected absent: a JSON null under the key counts as absent, as on SQLite.
REPLACE_ABSENT_LOOP_VALUE = Sql(
    sqlite=None,
    postgres="""
INSERT INTO loop_state (key, value) VALUES (:key, :value::jsonb)
ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE loop_state.value = 'null'::jsonb
RETURNING 1
""",
)

# A refused insert (a flood limit), counted in loop state in the refusing transaction.
RECORD_REFUSAL = Sql(
    sqlite="""
INSERT INTO loop_state (key, value)
VALUES (:key, json_object('total', 1, 'last_at', :now, 'last_source', :source, 'last_reason', :reason))
ON CONFLICT (key) DO UPDATE SET
    value = json_set(excluded.value, '$.total', coalesce(json_extract(loop_state.value, '$.total'), 0) + 1)
""",
    postgres="""
INSERT INTO loop_state (key, value)
VALUES (:key, jsonb_build_object('total', 1, 'last_at', :now::bigint,
                                    'last_source', :source::text, 'last_reason', :reason::text))
ON CONFLICT (key) DO UPDATE SET value = excluded.value
    || jsonb_build_object('total', coalesce((loop_state.value ->> 'total')::bigint, 0) + 1)
""",
)
