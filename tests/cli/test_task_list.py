"""`vigil task list` filters before it cuts, says what it cut, and lists every task
with --all; awaiting approval is a state of its own. A home of 2,000 tasks built by
SQL (the real schema), read by the real `vigil`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from vigil.config import load_settings
from vigil.store.sqlite import SqliteStore

TOTAL = 2_000


@pytest.fixture
async def crowded(home: Path) -> Path:
    """2,000 pending tasks; every 50th awaits approval, every 100th (others) is blocked."""
    path = load_settings(home).store.path
    await (await SqliteStore.open(path)).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :total)
           INSERT INTO tasks (subject, status, approval, priority, scheduled_for, created_at, updated_at, updated_by)
           SELECT 'task ' || i,
                  CASE WHEN i % 50 = 0 OR i % 100 = 1 THEN 'blocked' ELSE 'pending' END,
                  CASE WHEN i % 50 = 0 THEN 'pending' END, 5, i, i, i, 'human'
           FROM n""",
        {"total": TOTAL},
    )
    conn.close()
    return home


def test_the_filter_comes_before_the_limit_and_the_cut_is_said(vigil: VigilRunner, crowded: Path) -> None:
    blocked = vigil("task", "list", "--status", "blocked", check=True).stdout.splitlines()
    rows = blocked[1:-1]
    assert len(rows) == 50  # the default limit, filled with blocked tasks although they come last
    assert {r.split()[2] for r in rows} == {"blocked"}
    assert blocked[-1] == "… 10 more (50 of 60 shown; --limit N or --all shows more)"
    everything = vigil("task", "list", "--status", "blocked", "--all", check=True).stdout.splitlines()
    assert len(everything) == 61  # the header and 60 rows, nothing cut: no last line
    approval = vigil("task", "list", "--status", "approval", "--limit", "100", check=True).stdout.splitlines()
    assert len(approval) == 41
    assert all("(awaiting approval)" in line for line in approval[1:])


def test_json_gives_the_total_and_what_is_left(vigil: VigilRunner, crowded: Path) -> None:
    listed = json.loads(vigil("task", "list", "--limit", "7", "--json", check=True).stdout)
    assert (listed["total"], listed["more"], len(listed["tasks"])) == (TOTAL, TOTAL - 7, 7)
    ids = [t["id"] for t in json.loads(vigil("task", "list", "--all", "--json", check=True).stdout)["tasks"]]
    assert sorted(ids) == list(range(1, TOTAL + 1))
    approval = json.loads(vigil("task", "list", "--status", "approval", "--json", check=True).stdout)
    assert approval["total"] == 40
    assert {t["approval"] for t in approval["tasks"]} == {"pending"}


def test_finished_tasks_are_listed_latest_finish_first(vigil: VigilRunner, home: Path) -> None:
    for subject in ("first", "second", "third"):
        vigil("task", "add", subject, check=True)
    for task_id, status in (("3", "completed"), ("1", "failed"), ("2", "completed")):
        vigil("task", "close", task_id, "--status", status, "--summary", "done", check=True)
    listed = json.loads(vigil("task", "list", "--status", "completed,failed", "--json", check=True).stdout)
    assert [t["id"] for t in listed["tasks"]] == [2, 1, 3]
    assert vigil("task", "list", check=True).stdout.strip() == "no tasks"
