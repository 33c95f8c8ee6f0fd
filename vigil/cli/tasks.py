"""``vigil task …``: add (one, or many with --from), list, show, steer (prio, defer,
cancel, retry, note), close, ask, answer, unblock, and a person's review (approve,
reject, diff, open)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from vigil.cli.base import MAX_LIST_LIMIT, TASK_ID, Bounded, actor, person_only, with_store, with_tasks
from vigil.cli.root import main
from vigil.errors import InputError, OperationError
from vigil.models import MAX_RETRIES
from vigil.printable import printable

if TYPE_CHECKING:  # imported inside the commands at run time: start-up stays light
    from vigil.batch import LineReport
    from vigil.config import Settings
    from vigil.models import AddResult, Task
    from vigil.store.tasks import Tasks


@main.group()
def task() -> None:
    """Add, inspect and steer tasks."""


@task.command("add")
@click.argument("subject", required=False)
@click.option("-d", "--description", default="", help="Longer text for the agent.")
@click.option("-p", "--priority", default="5", help="1 (most urgent) to 9; default 5.")
@click.option("--skills", default="", help="Skill names, comma-separated (each must exist in the home's skills/).")
@click.option("--model", default=None, help="Agent model for this task (default: its skill's, else the executor's).")
@click.option("--at", "at", metavar="WHEN", help="Due time, ISO 8601 (UTC unless a zone is given).")
@click.option("--in", "in_", metavar="DURATION", help="Due after this long, e.g. 30m, 2h.")
@click.option("--key", "source_key", help="Source key: a second task with the same key is not created.")
@click.option("--dedup", type=click.Choice(["open", "ever"]), help="open (default with --key) or ever.")
@click.option("--source", default=None, help="Provenance (default: human, or task:<id> inside a run).")
@click.option("--parent", type=TASK_ID, help="Parent task id (a follow-up).")
@click.option("--depends-on", "depends_on", default="", help="Task ids that must complete first.")
@click.option(
    "--max-retries", type=Bounded(0, MAX_RETRIES, "a number of retries"), help="Retries after the first attempt."
)
@click.option("--requires-approval", is_flag=True, help="Wait (blocked) until a person runs vigil task approve.")
@click.option("--workdir", metavar="DIR", help="Folder the agent works in (default: the skill's, or the home).")
@click.option(
    "--max-cost",
    "max_cost_usd",
    type=click.FloatRange(min=0),
    help="USD its runs may spend together; a run that would pass it is ended (default: its skill's).",
)
@click.option("--repo", metavar="DIR", help="A git repository: the agent works in a worktree of it, on a branch.")
@click.option("--base", metavar="BRANCH", help="Branch to start from and merge into (default: the repo's current).")
@click.option("--check", "checks", multiple=True, metavar="CMD", help="A command that must pass (repeatable).")
@click.option("--review/--no-review", default=None, help="A person reviews the result before it completes.")
@click.option("--merge", type=click.Choice(["ff", "merge", "squash", "branch"]), help="How an approval merges.")
@click.option(
    "--from", "from_file", type=click.File("rb"), metavar="FILE", help="Add tasks from JSON Lines ('-': stdin)."
)
@click.option("--skip-bad", is_flag=True, help="With --from: add the good lines even if some are bad.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def task_add(ctx: click.Context, /, subject: str | None, **opts: Any) -> None:
    """Add a task (SUBJECT), or many from JSON Lines (--from FILE, one task a line).
    Prints what was created and what already existed."""
    from vigil.commands import add_task

    if opts["from_file"] is not None:
        _add_from(ctx, subject, opts)
        return
    if opts["skip_bad"]:
        raise InputError("--skip-bad goes with --from")
    if subject is None:
        raise click.UsageError("Missing argument 'SUBJECT' (or --from FILE for many tasks).", ctx)

    def add(tasks: Tasks, settings: Settings) -> tuple[AddResult, Task | None]:
        skills = [name.strip() for name in (opts.get("skills") or "").split(",") if name.strip()]
        if opts.get("max_cost_usd") is not None or skills:  # a cap never goes unmetered: said now
            from dispatch.attempt import unmetered_cap

            refused = unmetered_cap(settings, skills, opts.get("model"), opts.get("max_cost_usd"))
            if refused is not None:
                raise InputError(refused)
        return add_task(tasks, subject, opts, actor(), settings.skills_dir)

    result, task = with_tasks(ctx, add)
    if opts["as_json"]:
        from vigil.render import dumps, task_json

        click.echo(dumps({"id": result.task_id, "created": result.created, "task": task and task_json(task)}))
    elif result.created:
        waits = f" (awaiting approval: vigil task approve {result.task_id})" if opts["requires_approval"] else ""
        clamped = f" ({result.clamped})" if result.clamped else ""
        click.echo(f"created task #{result.task_id}{waits}{clamped}")
    elif result.task_id is not None:
        click.echo(f"exists: task #{result.task_id} already has key {opts['source_key']!r}")
    else:
        click.echo(f"exists: key {opts['source_key']!r} was already used (dedup ever)")


# The options of one task: with --from, each line gives them instead.
ONE_TASK_OPTIONS = (
    "description", "priority", "skills", "model", "at", "in_", "source_key", "dedup", "source",
    "parent", "depends_on", "max_retries", "requires_approval", "workdir",
)  # fmt: skip


def _add_from(ctx: click.Context, subject: str | None, opts: dict[str, Any]) -> None:
    """``task add --from FILE``: JSON Lines, one transaction; exit 1 if a line was refused."""
    from vigil.batch import add_lines, summary
    from vigil.render import dumps

    source = click.core.ParameterSource.COMMANDLINE
    given = [name for name in ONE_TASK_OPTIONS if ctx.get_parameter_source(name) is source]
    if subject is not None or given:
        what = "SUBJECT" if subject is not None else "--" + given[0].rstrip("_").replace("_", "-")
        raise InputError(f"{what} does not go with --from: each line gives its task's fields")
    lines = list(opts["from_file"])
    skip_bad = bool(opts["skip_bad"])

    def add(tasks: Tasks, settings: Settings) -> list[LineReport]:
        return add_lines(tasks, lines, actor=actor(), skills_dir=settings.skills_dir, skip_bad=skip_bad)

    reports = with_tasks(ctx, add)
    if opts["as_json"]:
        counts = {name: sum(r.result == name for r in reports) for name in ("created", "existing", "refused")}
        click.echo(dumps({**counts, "lines": [r.to_json() for r in reports]}))
    else:
        click.echo(summary(reports))
    if any(r.result == "refused" for r in reports):
        sys.exit(1)


@task.command("list")
@click.option("--status", default="", help="Statuses or states (approval), comma-separated; default: the open ones.")
@click.option(
    "--limit", type=Bounded(1, MAX_LIST_LIMIT, "a limit"), default=50, show_default=True, help="Show at most N tasks."
)
@click.option("--all", "all_", is_flag=True, help="Show every task that matches.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def task_list(ctx: click.Context, status: str, limit: int, all_: bool, as_json: bool) -> None:
    """List tasks in the order they will run (finished ones: the latest first); the
    last line says how many more match."""
    from vigil.commands import list_tasks
    from vigil.render import dumps, more_line, task_json, task_table

    window, now = with_tasks(ctx, lambda desk, settings: list_tasks(desk, status, None if all_ else limit))
    if as_json:
        shown = [task_json(t) for t in window.tasks]
        click.echo(dumps({"total": window.total, "more": window.after, "tasks": shown}))
        return
    click.echo(task_table(window.tasks, now))
    if window.after:
        click.echo(more_line(len(window.tasks), window.total))


@task.command("show")
@click.argument("task_id", type=TASK_ID)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def task_show(ctx: click.Context, task_id: int, as_json: bool) -> None:
    """Show every field of a task, its runs, notes and audit trail."""
    from vigil.commands import show_task

    click.echo(with_tasks(ctx, lambda tasks, settings: show_task(tasks, task_id, as_json)))


# A priority like -1 is a value to refuse as a priority, not an unknown option.
@task.command("prio", context_settings={"ignore_unknown_options": True})
@click.argument("task_id", type=TASK_ID)
@click.argument("priority")
@click.pass_context
def task_prio(ctx: click.Context, task_id: int, priority: str) -> None:
    """Set the priority of a pending or blocked task (1 = most urgent)."""
    from vigil.commands import parse_priority

    value = parse_priority(priority)
    t = with_tasks(ctx, lambda tasks, settings: tasks.set_priority(task_id, value, actor=actor()))
    click.echo(f"task #{t.id} priority {t.priority}")


@task.command("defer")
@click.argument("task_id", type=TASK_ID)
@click.argument("when")
@click.pass_context
def task_defer(ctx: click.Context, task_id: int, when: str) -> None:
    """Postpone a pending task to WHEN (ISO 8601) or by a DURATION (e.g. 2h)."""
    from vigil.clock import iso_utc
    from vigil.commands import defer_task

    t = with_tasks(ctx, lambda tasks, settings: defer_task(tasks, task_id, when, actor()))
    click.echo(f"task #{t.id} due {iso_utc(t.scheduled_for)}")


@task.command("cancel")
@click.argument("task_id", type=TASK_ID)
@click.pass_context
def task_cancel(ctx: click.Context, task_id: int) -> None:
    """Cancel a task; an active task gets a cancel request the dispatcher honours."""
    t = with_tasks(ctx, lambda tasks, settings: tasks.cancel(task_id, actor=actor()))
    if t.cancel_requested and t.status == "active":
        click.echo(f"task #{t.id} is running: cancel requested")
    else:
        click.echo(f"task #{t.id} canceled")


@task.command("retry")
@click.argument("task_id", type=TASK_ID)
@click.pass_context
def task_retry(ctx: click.Context, task_id: int) -> None:
    """Put a failed or canceled task back in the queue (its history is kept)."""
    from vigil.render import retried

    t = with_tasks(ctx, lambda tasks, settings: tasks.retry(task_id, actor=actor()))
    click.echo(f"task {retried(t)}")


@task.command("note")
@click.argument("task_id", type=TASK_ID)
@click.argument("text")
@click.pass_context
def task_note(ctx: click.Context, task_id: int, text: str) -> None:
    """Attach a progress note to a task."""
    n = with_tasks(ctx, lambda tasks, settings: tasks.add_note(task_id, text, author=actor()))
    click.echo(f"note added to task #{n.task_id}")


@task.command("close")
@click.argument("task_id", type=TASK_ID)
@click.option("--status", required=True, type=click.Choice(["completed", "failed", "blocked", "pending"]))
@click.option("--summary", required=True, help="What was done, or why not.")
@click.option("--at", "at", metavar="WHEN", help="With --status pending: try again at WHEN (ISO 8601).")
@click.option("--in", "in_", metavar="DURATION", help="With --status pending: try again after this long, e.g. 1h.")
@click.pass_context
def task_close(ctx: click.Context, /, task_id: int, **opts: Any) -> None:
    """Close a task (used by the agent for its own task). --status pending with --in
    or --at asks for a later retry of a running task: its attempt counts, and with
    no retry left (max_retries) it fails instead."""
    from vigil.clock import iso_utc
    from vigil.commands import close_task

    t = with_tasks(ctx, lambda tasks, settings: close_task(tasks, task_id, opts, actor()))
    if opts["status"] == "pending" and t.status == "pending":
        retry = f"retry {t.attempt_count + 1} of {t.max_retries + 1}"
        click.echo(f"task #{t.id} pending: {retry} due {iso_utc(t.scheduled_for)}")
    else:
        shown = f": {printable(t.result_summary or '')}" if opts["status"] != t.status else ""
        click.echo(f"task #{t.id} {t.status}{shown}")


@task.command("ask")
@click.argument("task_id", type=TASK_ID)
@click.argument("question")
@click.option("--choice", "choices", multiple=True, metavar="TEXT", help="An answer to offer (repeatable).")
@click.pass_context
def task_ask(ctx: click.Context, task_id: int, question: str, choices: tuple[str, ...]) -> None:
    """Ask a person QUESTION about a running task (its agent, or a command skill's
    script): when its run ends the task waits for `vigil task answer`."""
    t = with_tasks(ctx, lambda tasks, settings: tasks.ask(task_id, question, choices, actor=actor()))
    click.echo(f"task #{t.id}: question stored; it waits for an answer once this run ends")


@task.command("answer")
@click.argument("task_id", type=TASK_ID)
@click.argument("text", required=False)
@click.option("--choice", type=int, metavar="N", help="Answer with the question's choice N (1 is the first).")
@click.pass_context
def task_answer(ctx: click.Context, task_id: int, text: str | None, choice: int | None) -> None:
    """Answer the question of a waiting task: the answer is kept as a note and the
    task is due again at once, in its agent's own session where it can."""
    from vigil.commands import answer_task

    person_only("answer a task's question")
    t = with_tasks(ctx, lambda tasks, settings: answer_task(tasks, task_id, text, choice, actor()))
    click.echo(printable(f"task #{t.id} answered ({t.answer}); pending, due now"))


@task.command("unblock")
@click.argument("task_id", type=TASK_ID)
@click.argument("note", required=False)
@click.pass_context
def task_unblock(ctx: click.Context, task_id: int, note: str | None) -> None:
    """Put a blocked task back in the queue, due now, its attempts kept; NOTE (if
    given) is stored first, for its agent to read."""
    person_only("unblock a task")
    t = with_tasks(ctx, lambda tasks, settings: tasks.unblock(task_id, note, actor=actor()))
    click.echo(f"task #{t.id} unblocked; pending, due now")


@task.command("approve")
@click.argument("task_id", type=TASK_ID)
@click.option(
    "--commit", metavar="SHA", help="The change you reviewed (vigil task diff's to): refused if the task's is another."
)
@click.pass_context
def task_approve(ctx: click.Context, task_id: int, commit: str | None) -> None:
    """Approve a task that waits for approval (it becomes pending and runs when due),
    or one awaiting review (it completes; its change is merged as its merge says).
    Exits 1 when the change did not merge and went back to the agent."""
    from vigil.review import approve

    person_only("approve a task")
    done = with_store(
        ctx, lambda store, settings: approve(store, task_id, actor=actor(), commit=commit, github=settings.github)
    )
    click.echo(done.describe())
    if done.conflict is not None:
        ctx.exit(1)


@task.command("reject")
@click.argument("task_id", type=TASK_ID)
@click.option("--reason", required=True, help="Why not; kept in the task's summary and audit trail.")
@click.pass_context
def task_reject(ctx: click.Context, task_id: int, reason: str) -> None:
    """Reject a task that waits for approval (it is canceled, with the reason), or
    request changes to one awaiting review (it goes back to its agent, the reason a
    note its next prompt shows)."""
    person_only("reject a task")
    if not reason.strip():
        raise InputError("--reason must not be empty")
    from vigil.models import TaskStatus

    t = with_tasks(ctx, lambda tasks, settings: tasks.reject(task_id, reason, actor=actor()))
    if t.status is TaskStatus.PENDING:
        click.echo(f"task #{t.id}: changes requested; pending, back to its agent with your reason")
    else:
        click.echo(f"task #{t.id} rejected; canceled")


@task.command("diff")
@click.argument("task_id", type=int)
@click.option("--stat", is_flag=True, help="Only the files and their counts of lines added and removed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the files with their counts (and the patch).")
@click.pass_context
def task_diff(ctx: click.Context, task_id: int, stat: bool, as_json: bool) -> None:
    """Show a task's changes: its branch against its base (what an approval merges)."""
    from vigil.commands import diff_report

    click.echo(with_tasks(ctx, lambda tasks, settings: diff_report(tasks, task_id, stat=stat, as_json=as_json)))


@task.command("open")
@click.argument("task_id", type=int)
@click.option("--browse", is_flag=True, help="Open it in the web browser instead of printing it.")
@click.pass_context
def task_open(ctx: click.Context, task_id: int, browse: bool) -> None:
    """Print the web address of a task's pull request (else of its GitHub issue).
    Exits 1 when the task has neither."""
    link = with_tasks(ctx, lambda tasks, settings: tasks.get_task(task_id)).github
    url = None if link is None else link.pull_url or link.issue_url
    if url is None:
        raise OperationError(f"task #{task_id} has no pull request or GitHub issue")
    if browse:
        click.launch(url)
    else:
        click.echo(url)
