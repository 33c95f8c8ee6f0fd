"""sqlite3 rows → the domain's frozen dataclasses (JSON columns are text here)."""

from __future__ import annotations

import json
import sqlite3

from vigil.models import SensorState, Task
from vigil.store.rows import row_to_note, row_to_run, row_to_task_event, sensor_state_from_row, task_from_row

__all__ = ["row_to_note", "row_to_run", "row_to_sensor_state", "row_to_task", "row_to_task_event"]


def row_to_task(row: sqlite3.Row) -> Task:
    return task_from_row(row, json.loads(row["skills"]))


def row_to_sensor_state(row: sqlite3.Row) -> SensorState:
    return sensor_state_from_row(row, json.loads(row["state"]))
