"""What the simulated week sees from outside the daemon: the database, read-only,
the way a person's sqlite3 shell would, checked for the invariants that must hold at
any moment (tests/reliability/week.py polls it every 0.2 real seconds); the loop's
child processes, remembered by pid and start time; and the alerts in its log."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from vigil.clock import AcceleratedClock
from vigil.gate import GATE_KEY, GateState, LoopGate
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat

HOUR_MS = 3_600_000
ALERT_LINE = re.compile(r"alert (\w+): ")  # how dispatch.alerts logs each event it sends


class Observer:
    """Reads the database from outside, read-only, one short snapshot per look."""

    STUCK_SLACK_MS = 10 * 60_000  # simulated: the claim just before an idle heartbeat

    def __init__(self, db: Path, clock: AcceleratedClock) -> None:
        self.db = db
        self.clock = clock
        self.polls = 0
        self.idle_polls = 0  # polls that found the loop idle with its gate open
        self.problems: list[str] = []  # invariant breaches, one line each
        # failed and canceled, once a poll saw a task so: retention prunes them
        # within hours, so the statuses left at the end say nothing of the day
        self.ended_as: set[str] = set()
        self.dispatcher_seen = False  # a heartbeat was read: the daemon is up, its files open

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30, isolation_level=None)
        conn.row_factory = sqlite3.Row
        return conn

    def poll(self) -> list[tuple[int, int]]:
        """Check the invariants once; returns (task id, open run id) of active tasks."""
        if not self.db.exists():
            return []
        conn = self._connect()
        try:
            conn.execute("BEGIN")  # one snapshot for every read below
            if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                conn.execute("ROLLBACK")
                return []  # the daemon is still creating the schema
            active = conn.execute(
                "SELECT t.id AS task_id, r.id AS run_id FROM tasks t LEFT JOIN runs r"
                " ON r.task_id = t.id AND r.finished_at IS NULL WHERE t.status = 'active'"
            ).fetchall()
            values = {row["key"]: json.loads(row["value"]) for row in conn.execute("SELECT key, value FROM loop_state")}
            first_due = conn.execute(
                "SELECT id, scheduled_for FROM tasks t WHERE status = 'pending' AND NOT EXISTS"
                " (SELECT 1 FROM task_deps d JOIN tasks x ON x.id = d.depends_on"
                "  WHERE d.task_id = t.id AND x.status NOT IN ('completed', 'failed', 'canceled'))"
                " ORDER BY scheduled_for LIMIT 1"
            ).fetchone()
            ended = conn.execute("SELECT DISTINCT status FROM tasks WHERE status IN ('failed', 'canceled')").fetchall()
            conn.execute("COMMIT")
        finally:
            conn.close()
        self.polls += 1
        self.ended_as.update(str(row["status"]) for row in ended)
        sim_h = (self.clock.now_ms() - self.clock.anchor_ms) / HOUR_MS
        if len(active) > 1:
            self.problems.append(f"{sim_h:.1f} h: {len(active)} tasks active at once")
        for row in active:
            if row["run_id"] is None:
                self.problems.append(f"{sim_h:.1f} h: task #{row['task_id']} active without an open run")
        beat = DispatcherHeartbeat.from_json(values.get(HEARTBEAT_KEY))
        gate = LoopGate.from_json(values.get(GATE_KEY))
        self.dispatcher_seen = self.dispatcher_seen or beat is not None
        if beat is not None and beat.state == "idle" and open_since(gate, beat.heartbeat_at - self.STUCK_SLACK_MS):
            self.idle_polls += 1
            if first_due is not None and first_due["scheduled_for"] <= beat.heartbeat_at - self.STUCK_SLACK_MS:
                late_min = (beat.heartbeat_at - first_due["scheduled_for"]) / 60_000
                self.problems.append(
                    f"{sim_h:.1f} h: the loop went idle at {beat.heartbeat_at} with task #{first_due['id']} due "
                    f"{late_min:.0f} simulated min before"
                )
        return [(int(row["task_id"]), int(row["run_id"])) for row in active if row["run_id"] is not None]

    def counts(self) -> Counts:
        """Tasks by kind, and what pruned tasks leave behind."""
        if not self.db.exists():
            return Counts()
        conn = self._connect()
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                return Counts()
            row = conn.execute(
                "SELECT SUM(status IN ('pending', 'active', 'blocked')), SUM(status IN"
                " ('completed', 'failed', 'canceled')), COALESCE(MAX(id), 0) - COUNT(*),"
                " MIN(CASE WHEN status IN ('completed', 'failed', 'canceled') THEN completed_at END) FROM tasks"
            ).fetchone()
            counts = Counts(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0), oldest_finished_at=row[3])
            if _has_table(conn, "cost_archive"):
                counts.archive_rows, counts.oldest_archive_end = conn.execute(
                    "SELECT COUNT(*), MIN(start_ms + span_ms) FROM cost_archive"
                ).fetchone()
                counts.retired_keys, counts.oldest_retired_at = conn.execute(
                    "SELECT COUNT(*), MIN(retired_at) FROM retired_keys"
                ).fetchone()
                with contextlib.suppress(sqlite3.OperationalError):  # an SQLite built without dbstat
                    counts.archive_bytes = conn.execute(
                        "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN ('cost_archive', 'retired_keys')"
                    ).fetchone()[0]
        finally:
            conn.close()
        return counts


def open_since(gate: LoopGate, at_ms: int) -> bool:
    """Whether the gate as read now was already open at ``at_ms``. A gate lifted
    after an idle heartbeat was written says nothing about that heartbeat: the loop
    was gated then, and the backlog the gate held back is due but not stuck."""
    if gate.state is GateState.RUNNING:
        return gate.since <= at_ms
    return gate.state is GateState.GATED and gate.until is not None and gate.until <= at_ms


@dataclass
class Counts:
    open: int = 0
    finished: int = 0
    pruned: int = 0
    archive_rows: int = 0  # cost_archive: the spend of pruned tasks, by hour and group
    retired_keys: int = 0  # the source keys of pruned tasks
    archive_bytes: int = 0  # the pages of both
    oldest_finished_at: int | None = None  # epoch ms (simulated) the oldest finished task still kept ended
    oldest_archive_end: int | None = None  # epoch ms the span of the oldest cost_archive row ends
    oldest_retired_at: int | None = None  # epoch ms the oldest retired key was retired


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def start_time(pid: int) -> bytes | None:
    """The process's start time in clock ticks since boot (None: gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[19]
    except (OSError, IndexError):
        return None


def remember(seen: dict[int, bytes], pids: list[int]) -> None:
    for pid in pids:
        start = start_time(pid)
        if start is not None:
            seen[pid] = start


def logged_alerts(logs: Path) -> dict[str, int]:
    """Alert events in ``vigil.log`` and its rotated files, by kind."""
    found: dict[str, int] = {}
    for path in logs.glob("vigil.log*"):
        for match in ALERT_LINE.finditer(path.read_text(encoding="utf-8", errors="replace")):
            found[match[1]] = found.get(match[1], 0) + 1
    return found
