"""Flood limits (``[limits]``), checked inside the transaction that inserts a task.

Because the check and the insert share one transaction, several processes inserting
at once can never pass a limit together: the second one counts the first one's rows
(SQLite's ``BEGIN IMMEDIATE`` serialises writers; on PostgreSQL each count first takes
a transaction-scoped advisory lock on its parent or source). Three limits, each 0 to
disable:

* ``max_depth``: how deep a follow-up may sit in its parent chain (a task without a
  parent is depth 0, its follow-up depth 1);
* ``max_children``: follow-ups per parent task;
* ``max_per_source_per_day``: tasks one source adds in a rolling 24 h (``per_source``
  overrides it for named sources). People (source ``human``) are never limited.

An agent's task cannot jump the queue (``agent_priority``): a task the agent adds
(actor ``agent``: a follow-up through its MCP tools or ``vigil task add`` inside its
run) is never more urgent than its parent, nor than ``agent_priority_floor``; a more
urgent priority asked for is raised to that, in the same transaction as the insert,
and the result says so.

A refused insert is never silent: it is counted in loop state ``rejected_inserts``
in the same transaction, and the caller reports it (``FloodLimited`` for one task,
``BatchResult.rejected`` and the sensor's ``rejected_last`` for a batch).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from vigil.clock import MS_PER_DAY
from vigil.config import LimitsSettings
from vigil.errors import TaskNotFound
from vigil.models import REJECTED_INSERTS_KEY, NewTask
from vigil.store.sql.state import RECORD_REFUSAL
from vigil.store.sql.tasks import COUNT_CHILDREN, COUNT_SOURCE_SINCE, FOLLOW_UP_DEPTH, GET_TASK, LOCK_COUNT
from vigil.store.transaction import Sql, Tx

UNLIMITED_SOURCES = frozenset({"human"})
AGENT_ACTOR = "agent"


def agent_priority(tx: Tx, new: NewTask, actor: str, limits: LimitsSettings | None) -> tuple[NewTask, str | None]:
    """``new`` as ``actor`` may add it, and why its priority was changed (None: it
    was not). An agent's task is never more urgent (a lower number) than its parent's
    priority as it is now, read in the caller's transaction, nor than ``[limits]
    agent_priority_floor``; anyone else's is left as asked. Raises ``TaskNotFound``
    for a missing parent."""
    if actor != AGENT_ACTOR:
        return new, None
    floor = 1 if limits is None else limits.agent_priority_floor
    bounds = [(floor, f"[limits] agent_priority_floor = {floor}")] if floor > new.priority else []
    if new.parent_id is not None:
        row = tx.one(GET_TASK, {"id": new.parent_id})
        if row is None:
            raise TaskNotFound(new.parent_id)
        parent = int(row["priority"])
        if parent > new.priority:
            bounds.append((parent, f"its parent, task #{new.parent_id}, has priority {parent}"))
    if not bounds:
        return new, None
    priority, why = max(bounds)
    note = (
        f"priority {priority}, not {new.priority}: a task an agent adds is never more urgent than its parent "
        f"or [limits] agent_priority_floor ({why})"
    )
    return replace(new, priority=priority), note


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a flood limit refused a task: one line for people."""

    reason: str


class FloodGate:
    """The limits for one transaction. Counts read once are kept and incremented as
    tasks are added, so a batch costs one count query per parent and per source."""

    def __init__(self, limits: LimitsSettings, now_ms: int) -> None:
        self.limits = limits
        self._now_ms = now_ms
        self._children: dict[int, int] = {}
        self._per_source: dict[str, int] = {}
        self.refused = 0

    def _source_cap(self, source: str) -> int:
        return self.limits.per_source.get(source, self.limits.max_per_source_per_day)

    @staticmethod
    def _count(tx: Tx, lock_name: str, sql: Sql, params: dict[str, Any]) -> int:
        tx.run(LOCK_COUNT, {"name": lock_name})  # nothing to lock on SQLite
        row = tx.one(sql, params)
        assert row is not None
        return int(row["n"])

    def check(self, tx: Tx, new: NewTask) -> Refusal | None:
        """The limit ``new`` would break, or None when it may be added."""
        limits = self.limits
        if new.parent_id is not None and limits.max_depth:
            params = {"parent_id": new.parent_id, "max_depth": limits.max_depth}
            row = tx.one(FOLLOW_UP_DEPTH, params)
            assert row is not None
            depth = int(row["depth"])
            if depth > limits.max_depth:
                return Refusal(
                    f"follow-up of task #{new.parent_id} would be nested deeper than "
                    f"[limits] max_depth = {limits.max_depth}"
                )
        if new.parent_id is not None and limits.max_children:
            if new.parent_id not in self._children:
                params = {"parent_id": new.parent_id, "cap": limits.max_children}
                self._children[new.parent_id] = self._count(tx, f"parent:{new.parent_id}", COUNT_CHILDREN, params)
            if self._children[new.parent_id] >= limits.max_children:
                return Refusal(
                    f"task #{new.parent_id} already has {limits.max_children} follow-ups "
                    f"([limits] max_children = {limits.max_children})"
                )
        cap = self._source_cap(new.source)
        if cap and new.source not in UNLIMITED_SOURCES:
            if new.source not in self._per_source:
                window = {"source": new.source, "since": self._now_ms - MS_PER_DAY, "cap": cap}
                count = self._count(tx, f"source:{new.source}", COUNT_SOURCE_SINCE, window)
                self._per_source[new.source] = count
            if self._per_source[new.source] >= cap:
                return Refusal(f"source {new.source!r} already added {cap} tasks in the last 24 h ([limits] cap {cap})")
        return None

    def added(self, new: NewTask) -> None:
        """Count a task that was inserted in this transaction."""
        if new.parent_id is not None and new.parent_id in self._children:
            self._children[new.parent_id] += 1
        if new.source in self._per_source:
            self._per_source[new.source] += 1

    def record(self, tx: Tx, new: NewTask, refusal: Refusal) -> None:
        """Count a refusal in loop state, in the caller's transaction."""
        self.refused += 1
        params = {"key": REJECTED_INSERTS_KEY, "now": self._now_ms, "source": new.source, "reason": refusal.reason}
        tx.run(RECORD_REFUSAL, params)
