"""The loop: ``vigil run``, ``vigil dispatch once``, ``vigil mcp``, ``vigil status``,
``vigil doctor``, ``vigil service install``, and a person's ``vigil pause`` and
``vigil resume``."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable
from typing import TYPE_CHECKING

import click

from vigil.cli.base import CliState, actor, echo_verdicts, person_only, settings_for, with_store
from vigil.cli.root import main
from vigil.errors import VigilError
from vigil.printable import printable

if TYPE_CHECKING:  # imported inside the commands at run time: start-up stays light
    from vigil.config import Settings
    from vigil.store import Store


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


@main.command("pause")
@click.option("--reason", default="", help="Why, shown in vigil status and the TUI.")
@click.pass_context
def pause_command(ctx: click.Context, reason: str) -> None:
    """Stop the dispatcher from claiming tasks until `vigil resume` (sensors keep running)."""
    from vigil.clock import SystemClock
    from vigil.gate import pause

    person_only("pause the loop")
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

    person_only("resume the loop")
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
