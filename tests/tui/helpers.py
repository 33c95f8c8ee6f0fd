"""Reading what the app shows: the queue table's rows, notifications, screens."""

from __future__ import annotations

from tui.app import VigilApp
from tui.queue_screen import QueueScreen
from tui.queue_table import QueueTable


def queue(app: VigilApp) -> QueueScreen:
    return app.queue_screen


def table(app: VigilApp) -> QueueTable:
    return app.queue_screen.query_one(QueueTable)


def shown_ids(app: VigilApp) -> list[int]:
    return table(app).order


def notes(app: VigilApp) -> list[str]:
    """Texts of every notification shown so far."""
    return list(app.notices)


def cell(app: VigilApp, task_id: int, column: str) -> str:
    return table(app).get_cell(str(task_id), column).plain
