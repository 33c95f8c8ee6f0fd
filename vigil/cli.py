"""The ``vigil`` command: parse, build settings, call one function, map errors.

This module is a composition root: it may import every package, but only inside
the command that needs it, so ``vigil task add`` never pays for Textual or
APScheduler. A ``VigilError`` becomes one line on stderr and its exit code (2 for
bad input, 1 for a failed operation); a traceback reaching a user is a bug.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from vigil.distribution import DISTRIBUTION
from vigil.errors import InputError, OperationError, VigilError
from vigil.models import MAX_ID, MAX_RETRIES
from vigil.printable import printable

if TYPE_CHECKING:  # imported inside the commands at run time: start-up stays light
    from vigil.batch import LineReport
    from vigil.config import Settings
    from vigil.models import AddResult, Task, TaskEvent
    from vigil.store import Store
    from vigil.store.tasks import Tasks

T = TypeVar("T")


class Bounded(click.types.IntParamType):
    """An integer from ``low`` to ``high``. Every number the CLI takes is bounded (a
    task id by the database's 64-bit ids), so that a number beyond is a usage error,
    not an overflow deep in the driver."""

    def __init__(self, low: int, high: int, what: str) -> None:
        self.low, self.high, self.what = low, high, what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number: int = super().convert(value, param, ctx)  # "… is not a valid integer."
        if not self.low <= number <= self.high:
            self.fail(f"{number} is not {self.what} (an integer from {self.low} to {self.high})", param, ctx)
        return number


TASK_ID = Bounded(1, MAX_ID, "a task id")
MAX_LIST_LIMIT = 1_000_000


@dataclass
class CliState:
    home_arg: str | None


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"vigil: error: {printable(message, keep_newlines=False)}", err=True)
    sys.exit(code)


def colour_wanted() -> bool:
    """Colour only for a person's terminal: stdout is one and NO_COLOR
    (no-color.org) is unset or empty. Pipes, files and scripts get plain text."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def echo_verdicts(text: str) -> None:
    """Print ``text``, its verdict words (FAIL, DIED, PAUSED …) coloured when
    ``colour_wanted``."""
    from vigil.render import coloured

    click.echo(coloured(text) if colour_wanted() else text)


def actor() -> str:
    """Who is asking: the agent (inside a run) or a person."""
    return "agent" if os.environ.get("VIGIL_TASK_ID") else "human"


class VigilGroup(click.Group):
    """Maps Vigil errors and the parser's usage errors to one line and an exit
    code, for every command."""

    def main(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_undecodable(kwargs.get("args", args[0] if args else None))
        _refuse_unreadable_clock()
        kwargs["standalone_mode"] = False  # errors come back here instead of click's three lines
        try:
            code = super().main(*args, **kwargs)
        except click.UsageError as err:
            if _asks_for_help(err):
                # `vigil` or `vigil task` alone: the help a person was looking for,
                # on stdout as click formats it, not an error line
                click.echo(err.ctx.get_help())  # type: ignore[union-attr]
                sys.exit(0)
            hint = f" (see '{err.ctx.command_path} --help')" if err.ctx is not None else ""
            fail(err.format_message() + hint, 2)
        except click.ClickException as err:
            fail(err.format_message(), err.exit_code)
        except click.Abort:
            fail("aborted", 1)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except VigilError as err:
            fail(str(err), err.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", 130)


def _asks_for_help(err: click.UsageError) -> bool:
    """Whether ``err`` is a group given no command (``vigil``, ``vigil --home DIR``,
    ``vigil task``): click raises its no-arguments error, or, after options, its
    "Missing command" usage error."""
    if isinstance(err, click.exceptions.NoArgsIsHelpError):
        return True
    return err.ctx is not None and isinstance(err.ctx.command, click.Group) and err.message == "Missing command."


def _refuse_undecodable(argv: Any) -> None:
    """Exit 2 naming the first argument that is not UTF-8: Python hands such bytes
    over as lone surrogates, which no file, database or terminal can take."""
    for number, arg in enumerate(sys.argv[1:] if argv is None else argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raw = os.fsencode(arg)
            fail(f"argument {number} ({raw[:40].decode('ascii', 'backslashreplace')}) is not valid UTF-8 text")


def _refuse_unreadable_clock() -> None:
    """Exit 1 when the system clock reads past what Python can hold (2262-04-11, the
    limit of 64-bit nanoseconds): every ``time.time()`` then raises, logging's first."""
    try:
        time.time()
        time.monotonic()
    except OverflowError:
        fail("the system clock reads a time past 2262-04-11, which Python cannot represent; set it right", 1)


def settings_for(ctx: click.Context) -> Settings:
    """Find the home and load its settings."""
    from vigil.config import load_settings
    from vigil.home import find_home

    state: CliState = ctx.find_object(CliState)  # type: ignore[assignment]
    return load_settings(find_home(state.home_arg))


def with_store(ctx: click.Context, work: Callable[[Store, Settings], Awaitable[T]]) -> T:
    """Open the home's store, run ``work(store, settings)`` in one ``asyncio.run``."""
    settings = settings_for(ctx)

    import asyncio

    async def main() -> T:
        from vigil.store import open_store

        store = await open_store(settings)
        try:
            return await work(store, settings)
        finally:
            await store.close()

    return asyncio.run(main())


def with_tasks(ctx: click.Context, work: Callable[[Tasks, Settings], T]) -> T:
    """Run ``work(tasks, settings)`` on the home's store's blocking task methods
    (``vigil.store.tasks.Tasks``): on SQLite no event loop and no thread."""
    from vigil.store import task_desk

    settings = settings_for(ctx)
    with task_desk(settings) as tasks:
        return work(tasks, settings)


@click.group(cls=VigilGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", metavar="DIR", help="Home folder (default: $VIGIL_HOME, else the nearest vigil.toml upwards).")
@click.version_option(package_name=DISTRIBUTION)
@click.pass_context
def main(ctx: click.Context, home: str | None) -> None:
    """Vigil keeps an autonomous agent working 24/7 from one SQLite file."""
    ctx.obj = CliState(home_arg=home)


@main.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False, path_type=Path))
def init(directory: Path) -> None:
    """Make DIRECTORY a new home: vigil.toml (dry-run executor, history kept 90 days,
    a $10 daily budget), skills/, logs/."""
    from vigil.home import init_home

    for path in init_home(directory, safe_defaults=True):
        click.echo(f"created {path}")
    click.echo(f"next: vigil --home {directory} task add 'my first task'")


# --- tasks ------------------------------------------------------------------------


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

    _person_only("answer a task's question")
    t = with_tasks(ctx, lambda tasks, settings: answer_task(tasks, task_id, text, choice, actor()))
    click.echo(printable(f"task #{t.id} answered ({t.answer}); pending, due now"))


@task.command("unblock")
@click.argument("task_id", type=TASK_ID)
@click.argument("note", required=False)
@click.pass_context
def task_unblock(ctx: click.Context, task_id: int, note: str | None) -> None:
    """Put a blocked task back in the queue, due now, its attempts kept; NOTE (if
    given) is stored first, for its agent to read."""
    _person_only("unblock a task")
    t = with_tasks(ctx, lambda tasks, settings: tasks.unblock(task_id, note, actor=actor()))
    click.echo(f"task #{t.id} unblocked; pending, due now")


# --- reports and maintenance ---------------------------------------------------------


@main.command("events")
@click.option("--since", metavar="TIME", help="Only events at or after TIME: ISO 8601, or a duration ago (2h, 1d).")
@click.option("--task", "task_id", type=TASK_ID, metavar="ID", help="Only this task's events.")
@click.option("--kind", "kinds", multiple=True, metavar="K", help="Only this kind (repeatable): created, status, …")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--follow", "-f", is_flag=True, help="Then print new events as they commit, until Ctrl-C.")
@click.pass_context
def events_command(ctx: click.Context, /, **opts: Any) -> None:
    """The audit trail of every task, in order: who changed what, from → to."""

    from vigil.clock import SystemClock
    from vigil.events import POSTGRES_LOOKBACK, EventFilter, parse_kinds, parse_since
    from vigil.events import stream_events as stream
    from vigil.render import dumps_line, event_line, event_record

    since, as_json, follow = opts["since"], opts["as_json"], opts["follow"]
    wanted = EventFilter(
        since_ms=None if since is None else parse_since(since, SystemClock().now_ms()),
        task_id=opts["task_id"],
        kinds=parse_kinds(opts["kinds"]),
    )

    def emit(event: TaskEvent) -> None:
        text = dumps_line(event_record(event)) if as_json else event_line(event)
        click.echo(text)  # flushed per line, so a follower's reader sees each at once

    def work(store: Store, settings: Settings) -> Awaitable[None]:
        lookback = 0 if settings.store.url is None else POSTGRES_LOOKBACK
        return stream(store, wanted, emit, follow=follow, lookback=lookback)

    try:
        with_store(ctx, work)
    except KeyboardInterrupt:
        sys.exit(0)  # Ctrl-C is how a follower ends: not an error
    except BrokenPipeError:
        # The reader went away (| head): stop quietly; point stdout at /dev/null so
        # the interpreter's own flush at exit does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)


@main.command()
@click.option("--since", default="7d", show_default=True, help="Window, e.g. 24h, 7d, 30d.")
@click.option(
    "--by",
    type=click.Choice(["day", "skill", "source", "sensor", "model", "account"]),
    default="day",
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def stats(ctx: click.Context, since: str, by: str, as_json: bool) -> None:
    """Spend and tokens of finished runs, grouped by day, skill, source, sensor, model or
    account; the budget's use; what is left of each agent CLI account."""
    from vigil.commands import cost_report

    click.echo(
        with_store(
            ctx, lambda store, settings: cost_report(store, since, by, as_json, settings.budget, settings=settings)
        )
    )


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON: ok, and each check's level, what and detail.")
@click.option(
    "--probe",
    is_flag=True,
    help="Also send one minimal live request per account through the real agent CLI (it costs that request).",
)
@click.pass_context
def doctor(ctx: click.Context, as_json: bool, probe: bool) -> None:
    """Check the home, config (as vigil run would: the sensors too), database, the
    loop's gate, versions and the agent CLI; with --probe, each account's login,
    reach and limit state by a live request. Exits 1 when a check failed."""
    from dispatch.agents.doctor import agent_findings, cost_note, probe_findings
    from vigil.doctor import Finding, run_checks

    state: CliState = ctx.find_object(CliState)  # type: ignore[assignment]
    import asyncio

    def sensor_count(settings: Settings) -> int:
        from sensors.config import load_sensor_specs

        return len(load_sensor_specs(settings))

    found: list[Finding] = []
    echo = (lambda line: None) if as_json else echo_verdicts
    if probe:  # what it costs, before it runs (on stderr with --json, which prints one object)
        with contextlib.suppress(VigilError):  # a broken home is the checks' to report
            click.echo(cost_note(settings_for(ctx)), err=as_json)
    probes = probe_findings if probe else None
    ok = asyncio.run(
        run_checks(state.home_arg, echo, agent_findings, sensor_count, findings=found, probe_checks=probes)
    )
    if as_json:
        from vigil.render import dumps

        checks = [{"level": f.level, "what": f.what, "detail": f.detail} for f in found]
        click.echo(dumps({"ok": ok, "checks": checks}))
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("backup_path", metavar="BACKUP", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON: database, backup, tasks, kept.")
@click.pass_context
def restore(ctx: click.Context, backup_path: Path, as_json: bool) -> None:
    """Replace the database with a verified copy of BACKUP (stop every Vigil process
    of the home first); the replaced file is kept beside it."""
    from vigil.clock import SystemClock
    from vigil.daemon import every_lane
    from vigil.store.sqlite.backup import restore_file

    _person_only("restore the database")
    settings = settings_for(ctx)
    if settings.store.url is not None:
        raise InputError(
            f"the store is PostgreSQL ({settings.store.location}): restore it with pg_restore (see docs/scaling.md)"
        )
    with every_lane(settings, "vigil restore", "it would write on to the replaced file"):
        done = restore_file(settings.store.path, backup_path.resolve(), SystemClock().now_ms())
    if as_json:
        from vigil.render import dumps

        kept = None if done.kept is None else str(done.kept)
        click.echo(
            dumps(
                {
                    "database": str(done.database),
                    "backup": str(backup_path.resolve()),
                    "tasks": done.tasks,
                    "kept": kept,
                }
            )
        )
        return
    click.echo(f"restored {done.database} from {backup_path} ({done.tasks} task(s))")
    if done.kept is not None:
        click.echo(f"the replaced file is kept as {done.kept}")


@main.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON: path, bytes.")
@click.pass_context
def backup(ctx: click.Context, path: Path, as_json: bool) -> None:
    """Write a consistent copy of the database to PATH (safe while the loop runs)."""
    settings = settings_for(ctx)
    if settings.store.url is not None:
        raise InputError(
            f"the store is PostgreSQL ({settings.store.location}): back it up with pg_dump, "
            'e.g. pg_dump --format=custom --file=vigil.dump "$VIGIL_STORE_URL" (see docs/scaling.md)'
        )
    if path.exists():
        raise InputError(f"{path} already exists; choose a new file")
    with_store(ctx, lambda store, settings: store.backup(path.resolve()))
    if as_json:
        from vigil.render import dumps

        click.echo(dumps({"path": str(path.resolve()), "bytes": path.stat().st_size}))
        return
    click.echo(f"backup written to {path}")


# --- commands added by the sensors, dispatch and TUI packages live below ------------


@main.command("tui")
@click.option("--readonly", is_flag=True, help="Watch only: hide every action that writes.")
@click.option("--with-loop", is_flag=True, help="Also run the loop (vigil run) as a background process.")
@click.option("--task", "task_id", type=click.IntRange(min=1), metavar="ID", help="Open on task ID's screen.")
@click.option("--serve", is_flag=True, help="Serve the dashboard to browsers, behind a token (docs/tui.md).")
@click.option("--host", help="With --serve: the address to listen on (default: [serve] host, 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65535), help="With --serve: the port (default: [serve] port, 8377).")
@click.option("--public-url", metavar="URL", help="With --serve: the address browsers open (a proxy, a tunnel).")
@click.option("--print-url", is_flag=True, help="With --serve: print the link to open, token included, and exit.")
@click.option("--rotate-token", is_flag=True, help="With --serve: make a new token; old links stop working.")
@click.option("--browser-session", hidden=True)  # set by --serve for each browser tab's app
@click.pass_context
def tui_command(
    ctx: click.Context,
    *,
    readonly: bool,
    with_loop: bool,
    task_id: int | None,
    serve: bool,
    host: str | None,
    port: int | None,
    public_url: str | None,
    print_url: bool,
    rotate_token: bool,
    browser_session: str | None,
) -> None:
    """Open the live dashboard to watch the queue and steer it (quit: ctrl+q), or
    serve it to browsers (--serve)."""
    from tui import run_tui

    served = {"--host": host, "--port": port, "--public-url": public_url, "--print-url": print_url}
    served |= {"--rotate-token": rotate_token}
    if not serve and any(served.values()):
        raise InputError(f"{next(k for k, v in served.items() if v)} goes with --serve")
    if browser_session is not None and not re.fullmatch(r"[0-9a-z]{1,32}", browser_session):
        raise InputError("--browser-session: expected up to 32 lowercase letters and digits")
    if serve and (with_loop or browser_session or task_id):
        raise InputError("--serve starts no loop and opens no task: run `vigil run` beside it; links open tasks")
    if readonly and with_loop:
        raise InputError("--readonly and --with-loop exclude each other: a read-only TUI starts nothing")
    if not readonly and not print_url:
        _person_only("steer the queue from the TUI (use --readonly to watch)")
    settings = settings_for(ctx)
    if readonly and settings.store.url is None and not settings.store.path.exists():
        raise InputError(f"no database at {settings.store.path}; --readonly does not create one")
    if serve:
        from tui.serving import run_serve

        _person_only("serve the dashboard")  # the token is a person's key
        lines = run_serve(
            settings,
            host=host,
            port=port,
            public_url=public_url,
            readonly=readonly,
            print_url=print_url,
            rotate_token=rotate_token,
        )
        for line in lines:
            click.echo(line)
        return
    message = run_tui(settings, readonly=readonly, with_loop=with_loop, session=browser_session, task_id=task_id)
    if message:
        click.echo(printable(message))


@main.group("store")
def store_group() -> None:
    """Prune old history; move the store to PostgreSQL."""


@store_group.command("prune")
@click.option("--older-than", metavar="DURATION", help="Keep finished tasks this recent (default: [retention]).")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def store_prune(ctx: click.Context, older_than: str | None, dry_run: bool, as_json: bool) -> None:
    """Delete finished tasks older than [retention] keep_finished, with their runs,
    events, notes and transcripts; cost totals are kept."""
    from vigil.commands import prune_report

    _person_only("prune the history")
    click.echo(with_store(ctx, lambda store, settings: prune_report(store, settings, older_than, dry_run, as_json)))


@store_group.command("migrate")
@click.option("--to", "target", required=True, metavar="URL", help="An empty PostgreSQL database (postgresql://…).")
@click.pass_context
def store_migrate(ctx: click.Context, target: str) -> None:
    """Copy this home's SQLite store into an empty PostgreSQL database and verify it.

    Refused while a dispatcher runs; while it copies, every dispatcher lane and the
    SQLite file's write lock are held, so nothing can change behind it. Then the SQLite
    file is marked moved: every Vigil process refuses it from then on."""
    from vigil.daemon import every_lane
    from vigil.store.transfer import migrate_home, progress_line, summary
    from vigil.store_url import check_store_url, mask_password

    url = check_store_url(target, "--to")
    settings = settings_for(ctx)

    started: list[bool] = []

    def progress(table: str, copied: int, total: int) -> None:
        if not started:  # said once the checks passed and the copy begins
            started.append(True)
            click.echo(f"copying {settings.store.path} → {mask_password(url)}")
        line = progress_line(table, copied, total)
        if line is not None:
            click.echo(line)

    import asyncio

    why = "what it does during the copy would stay behind in the SQLite file"
    with every_lane(settings, "vigil store migrate", why):
        copies = asyncio.run(migrate_home(settings, url, progress))
    click.echo(summary(copies, mask_password(url)))


# --- sensors ----------------------------------------------------------------------


@main.group()
def sensors() -> None:
    """List, run, enable and disable the sensors of vigil.toml."""


@sensors.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def sensors_list(ctx: click.Context, as_json: bool) -> None:
    """Each sensor: schedule, enabled, last run, status, next due, created/ignored, failures, skipped runs."""
    from sensors.commands import list_sensors, sensors_table
    from vigil.render import dumps

    rows = with_store(ctx, list_sensors)
    click.echo(dumps(rows) if as_json else sensors_table(rows))


@sensors.command("run")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def sensors_run(ctx: click.Context, names: tuple[str, ...], as_json: bool) -> None:
    """Run the named sensors (default: every enabled one) once, now. Exits 1 if one failed."""
    from sensors.commands import reports_text, run_sensors

    reports = with_store(ctx, lambda store, settings: run_sensors(store, settings, names))
    click.echo(reports_text(reports, as_json))
    sys.exit(0 if all(r.ok for r in reports) else 1)


@sensors.command("skips")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def sensors_skips(ctx: click.Context, names: tuple[str, ...], as_json: bool) -> None:
    """The runs the named sensors (default: all) did not make, and why; newest first."""
    from sensors.commands import list_skips, skips_table
    from vigil.render import dumps

    rows = with_store(ctx, lambda store, settings: list_skips(store, settings, names))
    click.echo(dumps(rows) if as_json else skips_table(rows))


@sensors.command("enable")
@click.argument("name")
@click.pass_context
def sensors_enable(ctx: click.Context, name: str) -> None:
    """Let a sensor run on its schedule again."""
    from sensors.commands import set_enabled

    click.echo(with_store(ctx, lambda store, settings: set_enabled(store, settings, name, True)))


@sensors.command("disable")
@click.argument("name")
@click.pass_context
def sensors_disable(ctx: click.Context, name: str) -> None:
    """Stop a sensor from running on its schedule (vigil sensors run NAME still runs it)."""
    from sensors.commands import set_enabled

    click.echo(with_store(ctx, lambda store, settings: set_enabled(store, settings, name, False)))


# --- the loop: run, dispatch once, status, service ----------------------------------


@main.command("run")
@click.pass_context
def run_command(ctx: click.Context) -> None:
    """Run the sensors and the dispatcher until stopped (SIGTERM or Ctrl-C stop it cleanly)."""
    from vigil.daemon import run_daemon

    sys.exit(run_daemon(settings_for(ctx)))


@main.group("dispatch")
def dispatch_group() -> None:
    """Run tasks by hand, without the long-running loop."""


@dispatch_group.command("once")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: ran, the task (task show's fields), why not.")
@click.pass_context
def dispatch_once(ctx: click.Context, as_json: bool) -> None:
    """Run the next due task in the foreground. Exits 0 if a task ran, 3 if none was due
    (or the loop is paused)."""
    from vigil.daemon import configure_logging
    from vigil.daemon import dispatch_once as run_next

    settings = settings_for(ctx)
    configure_logging(settings)
    import asyncio

    task, closed = asyncio.run(run_next(settings))
    if as_json:
        from vigil.render import dumps, task_json

        why = None if task is not None else closed or "no task is due"
        click.echo(dumps({"ran": task is not None, "task": task and task_json(task), "not_claiming": why}))
        sys.exit(0 if task is not None else 3)
    if task is None:
        click.echo(f"not claiming: {printable(closed)}" if closed else "no task is due")
        sys.exit(3)
    summary = f": {printable(task.result_summary)}" if task.result_summary else ""
    status = "awaits review (vigil task diff, approve, reject)" if task.awaiting_review else str(task.status)
    click.echo(f"task #{task.id} {status}{summary}")


@main.command("mcp")
@click.option("--run", "run_id", type=int, required=True, help="The run whose agent this server serves.")
@click.pass_context
def mcp_command(ctx: click.Context, run_id: int) -> None:
    """Vigil's MCP server (stdio) for the agent of run RUN: its own task's tools only.
    The dispatcher starts it through the agent CLI; people rarely run it by hand."""
    from vigil.mcp_server import serve

    serve(settings_for(ctx), run_id)


@main.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def status_command(ctx: click.Context, as_json: bool) -> None:
    """Is a dispatcher alive, what is it running, the queue, and the sensors' health."""
    from dispatch.lanes import lock_probe
    from vigil.clock import SystemClock
    from vigil.render import dumps
    from vigil.status import gather_status, render_status

    def work(store: Store, settings: Settings) -> Awaitable[dict[str, object]]:
        return gather_status(store, settings, SystemClock().now_ms(), lock_probe(settings))

    report = with_store(ctx, work)
    if as_json:
        click.echo(dumps(report))
    else:
        echo_verdicts(render_status(report))


@main.group("service")
def service_group() -> None:
    """Run Vigil as a systemd user service."""


@service_group.command("install")
@click.option("--print", "--dry-run", "dry_run", is_flag=True, help="Show the unit; write nothing.")
@click.pass_context
def service_install(ctx: click.Context, dry_run: bool) -> None:
    """Write ~/.config/systemd/user/vigil.service (Restart=always) for this home."""
    from vigil.service import ENABLE_HINT, install_unit, store_url_hint, unit_path, unit_text

    settings = settings_for(ctx)
    hint = store_url_hint()
    if dry_run:
        click.echo(f"# {unit_path()} (not written)")
        click.echo(unit_text(settings), nl=False)
    else:
        path, changed = install_unit(settings)
        click.echo(f"{'wrote' if changed else 'unchanged'}: {path}")
        click.echo(ENABLE_HINT)
    if hint:
        click.echo(hint, err=dry_run)  # stderr with --print: stdout stays a valid unit


# --- guardrails: pause, resume, approvals, alerts -----------------------------------


def _person_only(what: str) -> None:
    """Refuse inside a task run: the agent must not lift its own guardrails."""
    if actor() != "human":
        raise InputError(f"only a person can {what} (this command runs inside task #{os.environ['VIGIL_TASK_ID']})")


@main.command("pause")
@click.option("--reason", default="", help="Why, shown in vigil status and the TUI.")
@click.pass_context
def pause_command(ctx: click.Context, reason: str) -> None:
    """Stop the dispatcher from claiming tasks until `vigil resume` (sensors keep running)."""
    from vigil.clock import SystemClock
    from vigil.gate import pause

    _person_only("pause the loop")
    now = SystemClock().now_ms()
    with_store(ctx, lambda store, settings: pause(store, reason=reason, by=actor(), now_ms=now))
    why = f": {printable(reason.strip())}" if reason.strip() else ""
    click.echo(f"loop paused{why}; a running task finishes; resume with: vigil resume")


@main.command("resume")
@click.pass_context
def resume_command(ctx: click.Context) -> None:
    """Let the dispatcher claim again, after a pause or a gate (usage limit, auth, failures),
    and use again the accounts that needed a person (a spend limit, usage turned off)."""
    from vigil.accounts import release_holds
    from vigil.clock import SystemClock
    from vigil.gate import GateState, LoopGate, resume

    _person_only("resume the loop")
    now = SystemClock().now_ms()

    async def work(store: Store, settings: Settings) -> tuple[LoopGate, list[str]]:
        # the accounts that needed a person (a spend limit, usage turned off) are theirs to free
        return await resume(store, by=actor(), now_ms=now), await release_holds(store, now_ms=now)

    before, freed = with_store(ctx, work)
    if freed:
        click.echo(f"account{'s' if len(freed) > 1 else ''} usable again: {', '.join(freed)}")
    if before.state is GateState.RUNNING:
        click.echo("the loop was already running")
    else:
        click.echo(printable(f"loop resumed (was {before.state}: {before.reason})"))


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

    _person_only("approve a task")
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
    _person_only("reject a task")
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


def _quiet_alert_log() -> None:
    """The alert commands report on stdout/stderr themselves; keep the log's copy out."""
    import logging

    logging.getLogger("vigil.alerts").addHandler(logging.NullHandler())


@main.group("alerts")
def alerts_group() -> None:
    """Try the [alerts] hook, and check for a stale dispatcher or sensors (for cron)."""


@alerts_group.command("test")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: ok, notify (one entry a URL), command.")
@click.pass_context
def alerts_test(ctx: click.Context, as_json: bool) -> None:
    """Send a test alert to the [alerts] command and to every [alerts] notify URL,
    and say which succeeded. Exits 1 if any failed."""
    from dispatch.alerts import alert_hook, make_event
    from vigil.clock import SystemClock

    settings = settings_for(ctx)
    if not settings.alerts.command and not settings.alerts.notify:
        raise InputError("no [alerts] command or notify in vigil.toml; see docs/guardrails.md")
    _quiet_alert_log()
    event = make_event("test", "test alert from vigil alerts test", SystemClock().now_ms())

    async def send(store: Store, settings: Settings) -> tuple[bool, str | None, list[dict[str, object]]]:
        hook = alert_hook(settings, store)
        results = await hook.notifiers.send({**event, "home": str(settings.home)})
        sent: list[dict[str, object]] = [
            {"position": r.position, "service": r.service, "ok": r.ok, "error": r.error} for r in results
        ]
        hooked = await hook.send_hook(event) if settings.alerts.command else True
        return hooked, hook.last_error, sent

    hooked, hook_error, sent = with_store(ctx, send)
    all_sent = all(r["ok"] for r in sent)
    if as_json:
        from vigil.render import dumps

        program = settings.alerts.command[0] if settings.alerts.command else None
        error = None if hooked else hook_error
        command = None if program is None else {"program": program, "ok": hooked, "error": error}
        click.echo(dumps({"ok": hooked and all_sent, "notify": sent, "command": command}))
        sys.exit(0 if hooked and all_sent else 1)
    for r in sent:
        said = "sent" if r["ok"] else f"FAILED: {r['error']}"
        click.echo(printable(f"notify[{r['position']}] {r['service']}: {said}"))
    if not hooked:
        fail(hook_error or "the alert hook failed", 1)
    if settings.alerts.command:
        click.echo(f"test alert sent to {settings.alerts.command[0]}")
    if not all_sent:
        fail("the test alert did not reach every notify URL (see above)", 1)


@alerts_group.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the alerts sent (kind, message, …).")
@click.pass_context
def alerts_check(ctx: click.Context, as_json: bool) -> None:
    """Alert once for a stale dispatcher or overdue sensors; run it from cron every few minutes."""
    from dispatch.alerts import alert_hook
    from dispatch.watchdog import check_stale
    from vigil.clock import SystemClock

    _quiet_alert_log()

    def check(store: Store, settings: Settings) -> Awaitable[list[dict[str, object]]]:
        return check_stale(store, settings, alert_hook(settings, store), SystemClock().now_ms())

    events = with_store(ctx, check)
    if as_json:
        from vigil.render import dumps

        click.echo(dumps({"alerts": events}))
        return
    for event in events:
        click.echo(printable(f"alerted: {event['message']}"))


# --- the chat: a Telegram bot (docs/chat.md) -----------------------------------------


@main.group("chat")
def chat_group() -> None:
    """The Telegram bot: answer, approve and steer from a chat."""


@chat_group.command("pair")
@click.pass_context
def chat_pair(ctx: click.Context) -> None:
    """Print a one-time code; the chat that sends it to the bot becomes the one allowed."""
    from vigil.chat.pairing import CODE_TTL_MS, start_pairing
    from vigil.clock import SystemClock

    _person_only("pair a chat")
    settings = settings_for(ctx)
    if settings.telegram is None:
        raise InputError("no [chat.telegram] table in vigil.toml: see docs/chat.md")
    telegram = settings.telegram
    code = with_store(ctx, lambda store, _: start_pairing(store, telegram, SystemClock().now_ms()))
    click.echo(
        f"Send this to your bot within {CODE_TTL_MS // 60_000} minutes (vigil run or vigil chat run must be up):"
    )
    click.echo(code)


@chat_group.command("unpair")
@click.pass_context
def chat_unpair(ctx: click.Context) -> None:
    """Forget the paired chat: from now on no chat can act until one pairs again."""
    from vigil.chat.pairing import unpair

    _person_only("unpair the chat")
    forgot = with_store(ctx, lambda store, _: unpair(store))
    click.echo("no chat was paired" if forgot is None else f"chat {forgot} unpaired: it can no longer act")


@chat_group.command("run")
@click.pass_context
def chat_run(ctx: click.Context) -> None:
    """Run the bot alone, until Ctrl-C (vigil run runs it too)."""
    import asyncio

    from vigil.chat.service import configured_token, serve_chat
    from vigil.daemon import configure_logging

    settings = settings_for(ctx)
    token = configured_token(settings)  # a missing token is said before anything starts
    configure_logging(settings)
    ctx.exit(asyncio.run(serve_chat(settings, token)))
