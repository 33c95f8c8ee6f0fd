"""sqlite3 rows → the domain's frozen dataclasses (JSON columns are text here)."""

from __future__ import annotations

import json
import sqlite3

from vigil.models import SensorState, Task
from vigil.store.rows import row_to_note, row_to_run, row_to_task_event, sensor_state_from_row, task_from_row

__all__ = ["row_to_note", "row_to_run", "row_to_sensor_state", "row_to_task", "row_to_task_event"]


def row_to_task(row: sqlite3.Row) -> Task:
    # sqlite3.Row finds a column by comparing names one by one; a task has 30 of
    # them, so reading each by name costs more than building a dict once.
    values = dict(zip(row.keys(), row, strict=True))
    skills = values["skills"]
    return task_from_row(values, () if skills == "[]" else json.loads(skills))


def row_to_sensor_state(row: sqlite3.Row) -> SensorState:
    return sensor_state_from_row(row, json.loads(row["state"]))
