"""What the task commands do, apart from parsing and printing (kept out of the
CLI module so the agent-facing behaviour is testable without click). The task
commands are blocking (``vigil.store.tasks.Tasks``): a one-shot command needs no
event loop.

Rendering and the budget are imported inside the commands that use them: every
``vigil task add`` imports this module, and start-up time is paid per command.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vigil.caps import DESCRIPTION_CHARS, SUBJECT_CHARS, SUMMARY_CHARS, refuse_over
from vigil.clock import SystemClock
from vigil.codework import MERGE_MODES, CodeOptions, parse_command_line
from vigil.durations import parse_duration_ms, parse_when_ms
from vigil.errors import InputError, SkillError
from vigil.home import check_skills_exist
from vigil.models import (
    MAX_ID,
    MAX_PRIORITY,
    MIN_PRIORITY,
    AddResult,
    DedupScope,
    NewTask,
    Task,
    TaskStatus,
    model_name_problem,
    skill_name_problem,
)
from vigil.states import TaskState
from vigil.store import CostGroup, Store
from vigil.task_query import TaskQuery, TaskWindow

if TYPE_CHECKING:
    from vigil.config import BudgetSettings, Settings
    from vigil.store.tasks import Tasks


def parse_priority(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"priority must be an integer {MIN_PRIORITY}-{MAX_PRIORITY}, got {text!r}") from None
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise InputError(f"priority must be {MIN_PRIORITY}-{MAX_PRIORITY}, got {value}")
    return value


def parse_states(text: str) -> tuple[TaskState, ...]:
    """``--status`` of ``vigil task list``: statuses or states (``approval``),
    comma-separated; raises ``InputError`` naming the ones there are."""
    from vigil.states import parse_states as parse

    try:
        return parse(text)
    except ValueError as err:
        raise InputError(str(err)) from None


def _parse_ids(text: str, option: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise InputError(f"{option}: expected task ids separated by commas, got {text!r}") from None
    if any(not 0 < i <= MAX_ID for i in ids):
        raise InputError(f"{option}: task ids are integers from 1 to {MAX_ID}")
    return ids


def task_in_run() -> int | None:
    """The task this process works on (``VIGIL_TASK_ID``, set by the dispatcher for
    the agent), or None outside a run. Raises ``InputError`` when it is set to
    something that is not a task id."""
    text = os.environ.get("VIGIL_TASK_ID")
    if not text:
        return None
    value = int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else 0
    if not 0 < value <= MAX_ID:
        shown = text if len(text) <= 30 else text[:29] + "…"
        raise InputError(f"VIGIL_TASK_ID={shown!r} is not a task id (an integer from 1 to {MAX_ID})")
    return value


def _model(value: object) -> str | None:
    """``--model``: a model name as the agent CLI takes it (``model_name_problem``:
    never a flag, no space or control character); None: not set."""
    if value is None:
        return None
    text = str(value).strip()
    if model_name_problem(text) is not None:
        raise InputError(f"--model: expected a model name such as claude-sonnet-4-5, got {value!r}")
    return text


def _max_cost(value: object) -> float | None:
    """``--max-cost``: a finite number of USD, 0 or more; None: not set. (1e309 is
    infinity, which JSON cannot hold, and NaN compares as no cap at all.)"""
    if value is None:
        return None
    cost = float(str(value))
    if not math.isfinite(cost) or cost < 0:
        raise InputError(f"--max-cost: expected a number of USD, 0 or more, got {value!r}")
    return cost


def _workdir(value: object) -> str | None:
    """``--workdir``: an existing folder, made absolute; None: not set. Refused now
    if missing: the person sees it, not a failed run later."""
    if not value:
        return None
    folder = Path(str(value)).expanduser().resolve()
    if not folder.is_dir():
        raise InputError(f"--workdir {value}: no such folder")
    return str(folder)


def _code(opts: Mapping[str, Any]) -> CodeOptions | None:
    """``--repo``, ``--base``, ``--check``, ``--review`` and ``--merge``; None when
    none is given. The repository is checked now (it must be a git repository):
    the person sees a mistake, not a failed run later."""
    repo = opts.get("repo")
    if repo:
        from vigil.git import repository_of

        top, _ = repository_of(Path(str(repo)).expanduser().resolve())
        repo = str(top)
    merge = opts.get("merge")
    if merge is not None and merge not in MERGE_MODES:
        raise InputError(f"--merge: expected one of {', '.join(MERGE_MODES)}, got {merge!r}")
    base = opts.get("base")
    if base is not None and (not base.strip() or base.startswith("-") or any(c.isspace() for c in base)):
        raise InputError(f"--base: expected a branch name, got {base!r}")
    checks = tuple(parse_command_line(text) for text in opts.get("checks") or ())
    code = CodeOptions(
        repo=repo or None,
        base=base,
        checks=checks or None,
        review=opts.get("review"),
        merge=merge,
    )
    return None if code.empty else code


def new_task_from_options(
    subject: str, opts: Mapping[str, Any], now_ms: int, skills_dir: Path | None = None
) -> NewTask:
    """Validate ``vigil task add`` options into a ``NewTask``; raises ``InputError``.
    With ``skills_dir`` (the home's ``skills/``) each skill must exist there."""
    if not subject.strip():
        raise InputError("subject must not be empty")
    refuse_over(subject, SUBJECT_CHARS, "the subject")
    refuse_over(opts.get("description") or "", DESCRIPTION_CHARS, "the description")
    at, in_ = opts.get("at"), opts.get("in_")
    if at is not None and in_ is not None:
        raise InputError("give --at or --in, not both")
    scheduled_for = None
    # given but empty is refused by the parsers, not taken for "now"
    if at is not None:
        scheduled_for = parse_when_ms(at, now_ms)
    elif in_ is not None:
        scheduled_for = now_ms + parse_duration_ms(in_)
    if opts.get("dedup") and not opts.get("source_key"):
        raise InputError("--dedup needs --key")
    if opts.get("source_key") is not None and not str(opts["source_key"]).strip():
        raise InputError("--key must not be empty")
    skills = tuple(s.strip() for s in (opts.get("skills") or "").split(",") if s.strip())
    for name in skills:
        # refused here, not only when the task runs: the person sees it now
        problem = skill_name_problem(name)
        if problem is not None:
            raise SkillError(problem)
    if skills_dir is not None:
        check_skills_exist(skills_dir, skills)
    parent = opts.get("parent")
    source = opts.get("source")
    in_run = task_in_run()
    if parent is None and in_run is not None:
        # The agent's new task is a follow-up of the one it works on, so the flood
        # limits on depth and children hold even when it forgets --parent.
        parent = in_run
    if source is None:
        source = f"task:{in_run}" if in_run is not None else "human"
    return NewTask(
        subject=subject,
        description=opts.get("description") or "",
        priority=parse_priority(str(opts.get("priority", "5"))),
        skills=skills,
        source=source,
        source_key=opts.get("source_key"),
        dedup=DedupScope(opts.get("dedup") or "open"),
        parent_id=parent,
        scheduled_for=scheduled_for,
        depends_on=_parse_ids(opts.get("depends_on") or "", "--depends-on"),
        max_retries=opts.get("max_retries"),
        requires_approval=bool(opts.get("requires_approval")),
        model=_model(opts.get("model")),
        workdir=_workdir(opts.get("workdir")),
        max_cost_usd=_max_cost(opts.get("max_cost_usd")),
        code=_code(opts),
    )


def add_task(
    tasks: Tasks, subject: str, opts: Mapping[str, Any], actor: str, skills_dir: Path | None = None
) -> tuple[AddResult, Task | None]:
    new = new_task_from_options(subject, opts, SystemClock().now_ms(), skills_dir)
    result = tasks.add_task(new, actor=actor)
    task = None if result.task_id is None else tasks.get_task(result.task_id)
    return result, task


ALL_ROWS = 2**62  # --all: no limit


def list_tasks(tasks: Tasks, status_text: str, limit: int | None) -> tuple[TaskWindow, int]:
    """``vigil task list``: the tasks of those states (default: the open ones) in the
    dispatcher's order, finished ones the latest finish first; filtered by the
    store before ``limit`` (None: every one) cuts the list. Returns the window (its
    ``total`` counts every match) and the time it was read."""
    query = TaskQuery(states=parse_states(status_text))
    return tasks.task_window(query, limit=ALL_ROWS if limit is None else limit), SystemClock().now_ms()


def show_task(tasks: Tasks, task_id: int, as_json: bool) -> str:
    from vigil.render import dumps, event_json, note_json, run_json, task_details, task_json
    from vigil.taskdiff import flags_of

    task = tasks.get_task(task_id)
    runs = tasks.list_runs(task_id)
    notes = tasks.list_notes(task_id)
    deps = tasks.dependencies(task_id)
    events = tasks.list_events(task_id)
    flags = flags_of(task.worktree)
    if not as_json:
        return task_details(task, runs, notes, deps, events, flags=flags)
    return dumps(
        {
            **task_json(task),
            "flagged": [{"path": f.path, "why": f.why} for f in flags],
            "depends_on": deps,
            "runs": [run_json(r) for r in runs],
            "notes": [note_json(n) for n in notes],
            "events": [event_json(e) for e in events],
        }
    )


def close_task(tasks: Tasks, task_id: int, opts: Mapping[str, Any], actor: str) -> Task:
    """``vigil task close``: completed, failed or blocked; or ``pending`` with ``--in``
    / ``--at``, the running task asking for a later retry (``Store.request_retry``)."""
    status, summary, at, in_ = opts["status"], opts["summary"], opts.get("at"), opts.get("in_")
    if not summary.strip():
        raise InputError("--summary must not be empty")
    refuse_over(summary, SUMMARY_CHARS, "--summary")
    run_id = _own_run(task_id)
    if status != "pending":
        if at is not None or in_ is not None:
            raise InputError("--at and --in go with --status pending (a later retry)")
        return tasks.close_task(task_id, TaskStatus(status), summary, actor=actor, run_id=run_id)
    if at is not None and in_ is not None:
        raise InputError("give --at or --in, not both")
    if at is None and in_ is None:
        raise InputError("--status pending needs --in or --at (when to try again)")
    now = SystemClock().now_ms()
    retry_at = parse_when_ms(at, now) if at is not None else now + parse_duration_ms(in_ or "")
    if retry_at < now:
        raise InputError("--at: the retry time is in the past")
    return tasks.request_retry(task_id, retry_at, summary, actor=actor, run_id=run_id)


def _own_run(task_id: int) -> int | None:
    """The run a ``command`` skill's script closes its own task from
    (``VIGIL_RUN_ID``, with ``VIGIL_TASK_ID`` naming this task), so the run records
    what it was closed as; None otherwise."""
    run, task = os.environ.get("VIGIL_RUN_ID", ""), os.environ.get("VIGIL_TASK_ID", "")
    return int(run) if run.isdigit() and task == str(task_id) else None


def diff_report(tasks: Tasks, task_id: int, *, stat: bool, as_json: bool) -> str:
    """``vigil task diff``: the task's artifact against its base (what an approval
    merges; once merged, what it merged), the files to look at first listed before
    the patch with a ``!``, every control character shown as an escape
    (``vigil.printable``: the agent wrote it). Raises ``InputError`` for a task
    without a repository, ``RepositoryError`` when the repository or the commit is
    gone."""
    from vigil.printable import printable
    from vigil.render import dumps
    from vigil.taskdiff import task_diff

    task = tasks.get_task(task_id)
    if task.worktree is None:
        raise InputError(f"task #{task_id} has no change: it works on no repository, or has not run yet")
    diff = task_diff(task.worktree, with_patch=not stat)
    wt = diff.worktree
    if as_json:
        report: dict[str, object] = {
            "task": task.id,
            "repo": wt.repo,
            "branch": wt.branch,
            "base": wt.base,
            "from": diff.since,
            "to": diff.until,
            "files": [{"path": f.path, "added": f.added, "removed": f.removed} for f in diff.files],
            "flagged": [{"path": f.path, "why": f.why} for f in diff.flags],
            "added": diff.added,
            "removed": diff.removed,
        }
        if not stat:
            report["patch"] = diff.patch
        return dumps(report)
    head = f"task #{task.id}: {wt.branch} against {wt.base} ({diff.since[:12]}..{diff.until[:12]}) in {wt.repo}"
    if diff.empty:
        head += "\n  the change is empty: nothing to merge"
    flagged = [f"! {flag.path}  ({flag.why})" for flag in diff.flags]
    if flagged:
        head = "\n".join([head, "look at these first:", *(f"  {line}" for line in flagged)])
    if not stat:
        # the agent wrote the content: its terminal escapes are shown, never obeyed
        return printable(f"{head}\n{diff.patch}".rstrip("\n"))
    width = max((len(f.path) for f in diff.files), default=0)
    lines = [head]
    for f in diff.files:
        counts = "binary" if f.added is None else f"+{f.added} -{f.removed}"
        lines.append(f"  {f.path:<{width}}  {counts}")
    count = len(diff.files)
    lines.append(f"  {count} file{'' if count == 1 else 's'} changed, +{diff.added} -{diff.removed}")
    return printable("\n".join(lines))


def answer_task(tasks: Tasks, task_id: int, text: str | None, choice: int | None, actor: str) -> Task:
    """``vigil task answer``: TEXT, or ``--choice N`` (1-based) of the task's offered
    choices. Raises ``InputError`` for neither or both, or a choice the task lacks."""
    if (text is None) == (choice is None):
        raise InputError("give the answer as TEXT or --choice N (not both)")
    if choice is not None:
        choices = tasks.get_task(task_id).choices
        if not choices:
            raise InputError(f"task #{task_id}'s question offers no choices; answer with TEXT")
        if not 1 <= choice <= len(choices):
            raise InputError(f"--choice must be 1 to {len(choices)}, not {choice}")
        text = choices[choice - 1]
    assert text is not None
    return tasks.answer(task_id, text, actor=actor)


def defer_task(tasks: Tasks, task_id: int, when: str, actor: str) -> Task:
    until = parse_when_ms(when, SystemClock().now_ms())
    return tasks.defer(task_id, until, actor=actor)


async def cost_report(
    store: Store,
    since: str,
    by: str,
    as_json: bool,
    budget: BudgetSettings | None = None,
    *,
    settings: Settings | None = None,
) -> str:
    """The cost table (or JSON); with a ``[budget]`` cap, its use over the last 24 h
    too; with ``settings``, what is left of each agent CLI account (``accounts``, as
    in ``vigil status``)."""
    from vigil.accounts import account_line, accounts_json
    from vigil.budget import budget_json, budget_line, budget_use
    from vigil.render import cost_json, cost_table, dumps

    now = SystemClock().now_ms()
    rows = await store.cost_rollup(since_ms=now - parse_duration_ms(since), by=CostGroup(by))
    use = None if budget is None or budget.daily_usd is None else await budget_use(store, budget, now)
    accounts = [] if settings is None else accounts_json(settings, await store.loop_values(), now)
    if as_json:
        report: dict[str, object] = {"since": since, "by": by, "rows": [cost_json(r) for r in rows]}
        if use is not None:
            report["budget"] = budget_json(use)
        if settings is not None:
            report["accounts"] = accounts
        return dumps(report)
    lines = [cost_table(rows, by)]
    if use is not None:
        lines.append(budget_line(use))
    if accounts:
        lines += ["accounts:", *(f"  {account_line(account)}" for account in accounts)]
    return "\n".join(lines)


async def prune_report(store: Store, settings: Settings, older_than: str | None, dry_run: bool, as_json: bool) -> str:
    """``vigil store prune``: run a full prune now (``older_than`` overrides
    ``[retention] keep_finished``) and say what it removed, or would remove."""
    from vigil.render import dumps
    from vigil.retention import prune_history

    keep = None if older_than is None else parse_duration_ms(older_than)
    pruned = await prune_history(store, settings, SystemClock().now_ms(), keep_finished_ms=keep, dry_run=dry_run)
    r = pruned.result
    if as_json:
        return dumps(
            {
                "dry_run": dry_run,
                "tasks": r.tasks,
                "runs": r.runs,
                "events": r.events,
                "notes": r.notes,
                "dependencies": r.dependencies,
                "transcripts": len(r.transcripts),
                "transcripts_removed": pruned.files_removed,
                "archive_rows_folded": r.folded,
                "archive_rows": r.costs,
                "retired_keys": r.keys,
                "workspaces_removed": pruned.workspaces,
            }
        )
    if dry_run:
        return f"would prune {r.tasks} finished task(s), {r.runs} run(s), {r.events} event(s), " + (
            f"{r.notes} note(s), {r.dependencies} dependency row(s), {len(r.transcripts)} transcript(s), "
            f"fold {r.folded} archive hour row(s) into days, drop {r.costs} archive row(s) "
            f"and {r.keys} retired key(s); remove {pruned.workspaces} workspace(s)"
        )
    return f"pruned {pruned.describe()}"
