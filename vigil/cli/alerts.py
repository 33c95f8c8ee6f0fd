"""``vigil alerts test`` and ``vigil alerts check`` (for cron)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable
from typing import TYPE_CHECKING

import click

from vigil.cli.base import fail, settings_for, with_store
from vigil.cli.root import main
from vigil.errors import InputError
from vigil.printable import printable

if TYPE_CHECKING:  # imported inside the commands at run time: start-up stays light
    from vigil.config import Settings
    from vigil.store import Store


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
