"""Database rows ↔ the domain's frozen dataclasses, for both backends.

The caller decodes the JSON columns (``Tx.loads``: text on SQLite, ``jsonb`` on
PostgreSQL) and passes the values in; everything else reads the same columns by name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Protocol

from vigil.codework import CodeOptions, Worktree, changes_from_text, changes_to_text, checks_from_text, checks_to_text
from vigil.models import (
    Claim,
    DedupScope,
    GitHubLink,
    Note,
    Outcome,
    Run,
    SensorSkip,
    SensorState,
    Task,
    TaskEvent,
    TaskStatus,
)


class Row(Protocol):
    """A row whose columns are read by name (``sqlite3.Row``, psycopg's ``dict_row``)."""

    def __getitem__(self, key: str, /) -> Any: ...


def task_from_row(row: Row, skills: Iterable[str]) -> Task:
    """``skills`` decoded by the backend (a JSON array in SQLite, ``jsonb`` here)."""
    return Task(
        id=row["id"],
        subject=row["subject"],
        description=row["description"],
        skills=tuple(skills),
        priority=row["priority"],
        status=TaskStatus(row["status"]),
        source=row["source"],
        source_key=row["source_key"],
        dedup=DedupScope(row["dedup"]),
        parent_id=row["parent_id"],
        scheduled_for=row["scheduled_for"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        started_at=row["started_at"],
        completed_at=row["completed_at"],
        attempt_count=row["attempt_count"],
        max_retries=row["max_retries"],
        cost_usd=row["cost_usd"],
        api_cost_usd=row["api_cost_usd"],
        tokens_in=row["tokens_in"],
        tokens_out=row["tokens_out"],
        result_summary=row["result_summary"],
        result_detail=row["result_detail"],
        model=row["model"],
        executor=row["executor"],
        claimed_by=row["claimed_by"],
        lease_until=row["lease_until"],
        cancel_requested=bool(row["cancel_requested"]),
        waiting_on=row["waiting_on"],
        approval=row["approval"],
        workdir=row["workdir"],
        review=row["review"],
        denials=row["denials"],
        max_cost_usd=row["max_cost_usd"],
        code=CodeOptions.from_json(row["code"]),
        worktree=Worktree.from_json(row["worktree"]),
        question=row["question"],
        choices=choices_from_text(row["choices"]),
        answer=row["answer"],
        asked_run=row["asked_run"],
        github=GitHubLink.from_json(row["github"]),
    )


def choices_to_text(choices: Iterable[str]) -> str | None:
    """``tasks.choices`` as stored on both backends: a JSON array as text, None when empty."""
    listed = list(choices)
    return json.dumps(listed) if listed else None


def choices_from_text(text: str | None) -> tuple[str, ...]:
    return tuple(str(c) for c in json.loads(text)) if text else ()


_RUN_DECODED = frozenset({"permission_denials", "checks", "changes", "gated"})


def row_to_run(row: Row) -> Run:
    values = {name: row[name] for name in Run.__dataclass_fields__ if name not in _RUN_DECODED}
    return Run(
        **values,
        permission_denials=denials_from_text(row["permission_denials"]),
        checks=checks_from_text(row["checks"]),
        changes=changes_from_text(row["changes"]),
        gated=bool(row["gated"]),
    )


def denials_to_text(denials: tuple[str, ...]) -> str | None:
    """``runs.permission_denials`` as stored: a JSON array, None when empty."""
    return json.dumps(list(denials)) if denials else None


def denials_from_text(text: str | None) -> tuple[str, ...]:
    return tuple(str(d) for d in json.loads(text)) if text else ()


def row_to_task_event(row: Row) -> TaskEvent:
    return TaskEvent(**{name: row[name] for name in TaskEvent.__dataclass_fields__})


def row_to_note(row: Row) -> Note:
    return Note(**{name: row[name] for name in Note.__dataclass_fields__})


def sensor_state_from_row(row: Row, state: dict[str, object], skips: Iterable[dict[str, Any]]) -> SensorState:
    """``state`` and ``skips`` decoded by the backend."""
    return SensorState(
        name=row["name"],
        enabled=bool(row["enabled"]),
        last_run_at=row["last_run_at"],
        last_duration_ms=row["last_duration_ms"],
        last_status=row["last_status"],
        last_error=row["last_error"],
        consecutive_failures=row["consecutive_failures"],
        created_last=row["created_last"],
        ignored_last=row["ignored_last"],
        dropped_last=row["dropped_last"],
        next_due_at=row["next_due_at"],
        state=state,
        rejected_last=row["rejected_last"],
        skips=tuple(SensorSkip(**skip) for skip in skips),
    )


def run_record_values(claim: Claim, outcome: Outcome, now: int) -> dict[str, Any]:
    """The named parameters that record ``outcome`` on the claim's run and add its
    costs to the task (``now``: epoch ms), the same on both backends."""
    return {
        "now": now,
        "run_id": claim.run_id,
        "task_id": claim.task.id,
        "outcome": str(outcome.kind),
        "error": outcome.error,
        "exit_code": outcome.exit_code,
        "cost_usd": outcome.cost_usd,
        "api_cost_usd": outcome.api_cost_usd,
        "tokens_in": outcome.tokens_in,
        "tokens_out": outcome.tokens_out,
        "cache_read_tokens": outcome.cache_read_tokens,
        "cache_write_tokens": outcome.cache_write_tokens,
        "model": outcome.model,
        "session_id": outcome.session_id,
        "transcript_path": outcome.transcript_path,
        "permission_denials": denials_to_text(outcome.permission_denials),
        "resumed_from": outcome.resumed_from,
        "priced_by": outcome.priced_by,
        "denials": len(outcome.permission_denials),
        "detail": outcome.detail or None,  # the task's result_detail (None: keep it)
        "summary": outcome.summary or None,
        "account": outcome.account,
        "checks": checks_to_text(outcome.checks),
        "changes": changes_to_text(outcome.changes),
    }
