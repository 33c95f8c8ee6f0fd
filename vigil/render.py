"""Turning domain values into what the CLI prints: stable JSON and plain text.

JSON field names are a contract (scripts and the agent parse them); times in JSON
are ISO 8601 UTC strings. Every text made here for a terminal, JSON included, has
its control and bidirectional characters written as escapes (``vigil.printable``):
stored text comes from sensors and agents, and must not drive the terminal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from vigil.clock import iso_utc
from vigil.codework import CheckResult, CodeOptions, RunChanges, Worktree
from vigil.durations import format_duration
from vigil.flags import Flag
from vigil.models import CostRow, Note, Run, Task, TaskEvent, TaskStatus
from vigil.printable import SUBJECT_SHOWN_CHARS, TEXT_SHOWN_CHARS, capped, printable

# Words that carry a line's verdict in `vigil status` and `vigil doctor`, and their
# colour on a terminal (ANSI SGR): red for what is broken, yellow for what waits
# on a person or on time, green for a check that passed.
_VERDICTS = {
    "FAIL": "1;31", "DIED": "1;31",
    "PAUSED": "1;33", "GATED": "1;33", "BACKING OFF": "33", "warn": "33",
    "ok": "32", "running": "32",
}  # fmt: skip
_VERDICT = re.compile(r"^(FAIL|warn|ok)\b|\b(DIED|PAUSED|GATED|BACKING OFF)\b|(?<=^loop: )running\b", re.MULTILINE)


def coloured(text: str) -> str:
    """``text`` with its verdict words coloured for a terminal (``FAIL``, ``DIED``,
    ``PAUSED`` …). Call it only when colour is wanted: stdout is a terminal and
    ``NO_COLOR`` is not set (the CLI decides)."""
    return _VERDICT.sub(lambda m: f"\x1b[{_VERDICTS[m.group()]}m{m.group()}\x1b[0m", text)


def task_json(task: Task) -> dict[str, object]:
    return {
        "id": task.id,
        "subject": task.subject,
        "description": task.description,
        "status": str(task.status),
        "priority": task.priority,
        "source": task.source,
        "source_key": task.source_key,
        "dedup": str(task.dedup),
        "skills": list(task.skills),
        "parent_id": task.parent_id,
        "scheduled_for": iso_utc(task.scheduled_for),
        "created_at": iso_utc(task.created_at),
        "updated_at": iso_utc(task.updated_at),
        "started_at": iso_utc(task.started_at),
        "completed_at": iso_utc(task.completed_at),
        "attempt_count": task.attempt_count,
        "max_retries": task.max_retries,
        "cost_usd": task.cost_usd,
        "api_cost_usd": task.api_cost_usd,
        "tokens_in": task.tokens_in,
        "tokens_out": task.tokens_out,
        "result_summary": task.result_summary,
        "result_detail": task.result_detail,
        "model": task.model,
        "executor": task.executor,
        "claimed_by": task.claimed_by,
        "lease_until": iso_utc(task.lease_until),
        "cancel_requested": task.cancel_requested,
        "waiting_on": task.waiting_on,
        "approval": task.approval,
        "review": task.review,
        "denials": task.denials,
        "workdir": task.workdir,
        "max_cost_usd": task.max_cost_usd,
        "code": None if task.code is None else code_json(task.code),
        "worktree": None if task.worktree is None else worktree_json(task.worktree),
        "question": task.question,
        "choices": list(task.choices),
        "answer": task.answer,
        "github": None if task.github is None else json.loads(task.github.to_json()),
    }


def code_json(code: CodeOptions) -> dict[str, object]:
    """A task's own code options; a key it does not set is absent."""
    value: dict[str, object] = {
        "repo": code.repo,
        "base": code.base,
        "workspace": code.workspace,
        "checks": None if code.checks is None else [c.to_json() for c in code.checks],
        "review": code.review,
        "merge": code.merge,
    }
    return {k: v for k, v in value.items() if v is not None}


def worktree_json(worktree: Worktree) -> dict[str, object]:
    return {
        "repo": worktree.repo,
        "path": worktree.path,
        "branch": worktree.branch,
        "base": worktree.base,
        "start": worktree.start,
        "merge": worktree.merge,
        "merged": worktree.merged,
        "artifact": worktree.artifact,
        "ref": worktree.ref,
    }


def check_json(check: CheckResult) -> dict[str, object]:
    return {
        "command": list(check.argv),
        "exit_code": check.exit_code,
        "timed_out": check.timed_out,
        "passed": check.passed,
        "output": check.output,
    }


def changes_json(changes: RunChanges) -> dict[str, object]:
    return {
        "branch": changes.branch,
        "head": changes.head,
        "commits": list(changes.commits),
        "files": changes.files,
        "insertions": changes.insertions,
        "deletions": changes.deletions,
        "dirty": changes.dirty,
    }


def run_json(run: Run) -> dict[str, object]:
    return {
        "id": run.id,
        "attempt": run.attempt,
        "started_at": iso_utc(run.started_at),
        "finished_at": iso_utc(run.finished_at),
        "outcome": run.outcome,
        "error": run.error,
        "exit_code": run.exit_code,
        "cost_usd": run.cost_usd,
        "api_cost_usd": run.api_cost_usd,
        "tokens_in": run.tokens_in,
        "tokens_out": run.tokens_out,
        "cache_read_tokens": run.cache_read_tokens,
        "cache_write_tokens": run.cache_write_tokens,
        "model": run.model,
        "session_id": run.session_id,
        "transcript_path": run.transcript_path,
        "permission_denials": list(run.permission_denials),
        "workspace": run.workspace,
        "summary": run.summary,
        "agent_status": run.agent_status,
        "account": run.account,
        "checks": [check_json(c) for c in run.checks],
        "changes": None if run.changes is None else changes_json(run.changes),
        "resumed_from": run.resumed_from,
        "priced_by": run.priced_by,
    }


def event_json(event: TaskEvent) -> dict[str, object]:
    return {
        "at": iso_utc(event.at),
        "actor": event.actor,
        "kind": event.kind,
        "from": event.from_value,
        "to": event.to_value,
    }


TIME_KINDS = frozenset({"scheduled"})  # audit kinds whose from/to are epoch ms: shown as ISO times


def _value(event: TaskEvent, value: str | None) -> str | None:
    if value is not None and event.kind in TIME_KINDS and value.lstrip("-").isdigit():
        return iso_utc(int(value))
    return value


def event_record(event: TaskEvent) -> dict[str, object]:
    """One event as JSON (stable field names; times ISO 8601 UTC)."""
    return {
        "id": event.id,
        "task_id": event.task_id,
        "at": iso_utc(event.at),
        "actor": event.actor,
        "kind": event.kind,
        "from": _value(event, event.from_value),
        "to": _value(event, event.to_value),
        "detail": event.detail,
    }


def event_line(event: TaskEvent, *, with_task: bool = True) -> str:
    """One event for people: ``<time>  #<task>  <kind>  <from> → <to>  by <actor>``
    (without ``#<task>`` when the task is known from the context)."""
    before, after = _value(event, event.from_value), _value(event, event.to_value)
    change = f"{before} → {after}" if before is not None else (after or "")
    detail = f"  ({' '.join(event.detail.split())})" if event.detail else ""
    task = f"  #{event.task_id}" if with_task else ""
    return printable(
        f"{iso_utc(event.at)}{task}  {event.kind}  {change}  by {event.actor}{detail}", keep_newlines=False
    )


def note_json(note: Note) -> dict[str, object]:
    return {"at": iso_utc(note.at), "author": note.author, "text": note.text}


def cost_json(row: CostRow) -> dict[str, object]:
    return {
        "key": row.key,
        "runs": row.runs,
        "tasks": row.tasks,
        "cost_usd": round(row.cost_usd, 6),
        "api_cost_usd": round(row.api_cost_usd, 6),
        "tokens_in": row.tokens_in,
        "tokens_out": row.tokens_out,
        "cache_read_tokens": row.cache_read_tokens,
        "cache_write_tokens": row.cache_write_tokens,
    }


def dumps(value: object) -> str:
    return printable(json.dumps(value, ensure_ascii=False, indent=2))


def dumps_line(value: object) -> str:
    """``value`` as one line of JSON (``vigil events --json``)."""
    return printable(json.dumps(value, ensure_ascii=False))


def one_line(text: str, width: int) -> str:
    """First line of ``text``, cut to ``width`` characters with an ellipsis."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= width else first[: width - 1] + "…"


def _due(task: Task, now_ms: int) -> str:
    if task.status is TaskStatus.PENDING and task.waiting_on:
        return f"waits on {task.waiting_on}"
    if task.status is TaskStatus.PENDING and task.scheduled_for > now_ms:
        return "in " + format_duration(task.scheduled_for - now_ms)
    return format_duration(now_ms - task.created_at) + " ago"


def markers(task: Task) -> str:
    """What a person should know at a glance, before the subject: ``(awaiting
    review, 2 denied) ``, ``(asks: staging or prod?) ``; empty when there is
    nothing to say."""
    said = []
    if task.status is TaskStatus.WAITING and task.question is not None:
        said.append(f"asks: {one_line(task.question, 50)}")
    if task.awaiting_approval:
        said.append("awaiting approval")
    if task.awaiting_review:
        said.append("awaiting review")
    if task.denials:
        said.append(f"{task.denials} denied")
    return f"({', '.join(said)}) " if said else ""


def retried(task: Task) -> str:
    """What a retry made of ``task``: ``#7 pending again``, or, for a task that
    needs a person's approval before it runs (a rejected approval retried), that it
    is blocked awaiting one."""
    if task.awaiting_approval:
        return f"#{task.id} blocked again, awaiting approval (vigil task approve {task.id})"
    return f"#{task.id} {task.status} again"


def task_table(tasks: Sequence[Task], now_ms: int) -> str:
    """A plain-text table (no colour: it is also read by scripts and agents)."""
    if not tasks:
        return "no tasks"
    header = f"{'ID':>6}  P  {'STATUS':<9}  {'TRIES':<5}  {'DUE/AGE':<11}  SUBJECT"
    lines = [header]
    for t in tasks:
        tries = f"{t.attempt_count}/{t.max_retries + 1}"
        lines.append(
            f"{t.id:>6}  {t.priority}  {t.status!s:<9}  {tries:<5}  {_due(t, now_ms):<11}  "
            f"{markers(t)}{one_line(t.subject, 60)}"
        )
    return printable("\n".join(lines))


def more_line(shown: int, total: int) -> str:
    """The last line of a list that was cut."""
    return f"… {total - shown:,} more ({shown:,} of {total:,} shown; --limit N or --all shows more)"


def _run_origins(run: Run) -> list[str]:
    """Where a run's session and its price came from, a line each (none: neither said)."""
    lines = [] if run.resumed_from is None else [f"     resumed the session of run {run.resumed_from}"]
    return lines + ([f"     priced by {one_line(run.priced_by, 160)}"] if run.priced_by else [])


def task_details(
    task: Task,
    runs: Iterable[Run],
    notes: Iterable[Note],
    deps: Sequence[int],
    events: Iterable[TaskEvent] = (),
    *,
    flags: Sequence[Flag] = (),
) -> str:
    """``vigil task show``; ``flags``: the files of its change to look at first."""
    fields = task_json(task)
    width = max(len(k) for k in fields)
    structured = ("result_detail", "code", "worktree", "github")
    lines = [f"{k:<{width}}  {_field_text(k, v)}" for k, v in fields.items() if k not in structured]
    if task.worktree is not None:
        lines += worktree_lines(task.worktree, width)
        lines += [f"{'look first' if i == 0 else '':<{width}}  ! {f.path}  ({f.why})" for i, f in enumerate(flags)]
    if task.github is not None:
        lines += [
            f"{label:<{width}}  {text}"
            for label, text in (("issue", task.github.issue_text), ("pull_request", task.github.pull_text))
            if text is not None
        ]
    if deps:
        lines.append(f"{'depends_on':<{width}}  {', '.join(f'#{d}' for d in deps)}")
    run_lines = []
    for r in runs:
        account = f" on {r.executor}:{r.account}" if r.account else ""
        run_lines.append(
            f"  #{r.attempt} {r.outcome or 'running'}{account} cost=${r.cost_usd:.4f} "
            f"tokens={r.tokens_in}/{r.tokens_out}" + (f" error={one_line(r.error, 80)}" if r.error else "")
        )
        if r.agent_status:
            run_lines.append(f"     the agent closed it as {r.agent_status}: {one_line(r.summary or '', 100)}")
        run_lines += [f"     denied: {one_line(denial, 100)}" for denial in r.permission_denials]
        if r.workspace:
            run_lines.append(f"     workspace: {r.workspace}")
        if r.changes is not None:
            run_lines.append(f"     {changes_line(r.changes)}")
        run_lines += [f"     check {c.how()}: {c.label}" for c in r.checks]
        run_lines += _run_origins(r)
    if run_lines:
        lines += ["runs:", *run_lines]
    note_lines = [f"  [{iso_utc(n.at)}] {n.author}: {capped(n.text, TEXT_SHOWN_CHARS)}" for n in notes]
    if note_lines:
        lines += ["notes:", *note_lines]
    event_lines = [f"  {event_line(e, with_task=False)}" for e in events]
    if event_lines:
        lines += ["events:", *event_lines]
    if task.result_detail:
        lines += ["result:", task.result_detail]
    return printable("\n".join(lines))


def _field_text(name: str, value: object) -> str:
    """A field of ``task show``'s text: ``-`` for None, long text cut with a marker
    (the subject sooner, so that the fields after it stay in sight)."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return capped(value, SUBJECT_SHOWN_CHARS if name == "subject" else TEXT_SHOWN_CHARS)
    return str(value)


def worktree_lines(worktree: Worktree, width: int) -> list[str]:
    """The task's repository work for ``vigil task show``: its branch, base, clone,
    change (the artifact) and merge."""
    lines = [
        f"{'branch':<{width}}  {worktree.branch} (from {worktree.base} at {worktree.start[:12]})",
        f"{'repository':<{width}}  {worktree.repo}",
        f"{'workspace':<{width}}  {worktree.path} (the agent's clone)",
    ]
    if worktree.artifact is not None:
        lines.append(f"{'change':<{width}}  {worktree.artifact[:12]} ({worktree.ref or 'the task ref'})")
    if worktree.merged is not None:
        how = "left for a pull request" if worktree.merge == "branch" else f"{worktree.merge} into {worktree.base}"
        lines.append(f"{'merged':<{width}}  {worktree.merged[:12]} ({how})")
    return lines


def changes_line(changes: RunChanges) -> str:
    """``branch vigil/3-x: 2 new commits, 3 files, +10 -2 (left uncommitted, committed by Vigil)``."""
    count = len(changes.commits)
    left = " (left uncommitted, committed by Vigil)" if changes.dirty else ""
    return f"branch {changes.branch}: {count} new commit{'' if count == 1 else 's'}, {changes.stat()}{left}"


def cost_table(rows: Sequence[CostRow], by: str) -> str:
    if not rows:
        return "no runs in this period"
    header = f"{by.upper():<24} {'TASKS':>6} {'RUNS':>6} {'COST $':>10} {'API $':>10} {'TOK IN':>10} {'TOK OUT':>10}"
    lines = [header]
    for r in rows:
        lines.append(
            f"{one_line(r.key, 24):<24} {r.tasks:>6} {r.runs:>6} {r.cost_usd:>10.4f} {r.api_cost_usd:>10.4f} "
            f"{r.tokens_in:>10} {r.tokens_out:>10}"
        )
    total = sum(r.cost_usd for r in rows)
    lines.append(f"{'total':<24} {'':>6} {sum(r.runs for r in rows):>6} {total:>10.4f}")
    return printable("\n".join(lines))


def failing_notifiers(health: object) -> list[str]:
    """One line per notification service whose last send failed, from the value of
    ``loop_state`` key ``NOTIFY_KEY``; empty when none is failing."""
    if not isinstance(health, dict):
        return []
    lines = []
    for position, entry in sorted(health.items(), key=lambda item: str(item[0]).zfill(6)):
        if isinstance(entry, dict) and entry.get("error"):
            when = f" (since {iso_utc(entry['failed_at'])})" if isinstance(entry.get("failed_at"), int) else ""
            lines.append(f"notify[{position}] {entry.get('service')} is failing{when}: {entry['error']}")
    return lines
