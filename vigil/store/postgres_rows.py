"""PostgreSQL rows (``dict_row``) → the domain's frozen dataclasses (``jsonb``
columns arrive as Python values already)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vigil.models import SensorState, Task
from vigil.store.rows import row_to_note, row_to_run, row_to_task_event, sensor_state_from_row, task_from_row

__all__ = ["row_to_note", "row_to_run", "row_to_sensor_state", "row_to_task", "row_to_task_event"]

Row = Mapping[str, Any]


def row_to_task(row: Row) -> Task:
    return task_from_row(row, row["skills"])


def row_to_sensor_state(row: Row) -> SensorState:
    return sensor_state_from_row(row, dict(row["state"]))
