"""The Textual dashboard: watch and steer the loop (``vigil tui``).

``run_tui`` is what the CLI calls: it opens the store (with a short busy timeout:
the TUI retries on its own timer, it never waits long on a lock), optionally
starts the loop as a background process, runs the app, and returns a line for
the terminal saying what happened to the loop. Without a terminal (``vigil tui |
cat``) it refuses with one line (``InputError``: exit 2).
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import replace

from vigil.config import Settings
from vigil.errors import InputError
from vigil.store import Store, open_store

TUI_BUSY_TIMEOUT_MS = 1000


def tui_settings(settings: Settings) -> Settings:
    """The settings with the TUI's shorter busy timeout."""
    busy = min(settings.store.busy_timeout_ms, TUI_BUSY_TIMEOUT_MS)
    return replace(settings, store=replace(settings.store, busy_timeout_ms=busy))


def run_tui(
    settings: Settings,
    *,
    readonly: bool = False,
    with_loop: bool = False,
    session: str | None = None,
    task_id: int | None = None,
) -> str:
    """Run the app until the user quits; returns what to tell them afterwards.
    ``session``: this app is a browser session of ``vigil tui --serve`` (named in
    the audit trail; its terminal is the browser, through textual-serve's driver).
    ``task_id``: open on that task's screen."""
    from tui.app import LOOP_STOP_MARGIN_S, VigilApp, configure_logging
    from tui.loop_process import BackgroundLoop
    from vigil.clock import SystemClock

    settings = tui_settings(settings)
    configure_logging(settings.logs_dir / "tui.log", settings.dispatch.pass_env)

    async def opener() -> Store:
        return await open_store(settings)

    async def check() -> None:
        # Open once before the screen takes over, so a bad database is a one-line error.
        store = await opener()
        await store.close()

    asyncio.run(check())
    if session is None and not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Escape codes written into a pipe, and keys that never come: say so instead.
        raise InputError("vigil tui needs a terminal (its input or output is not one); try vigil status or task list")
    loop = BackgroundLoop(settings.home, settings.logs_dir) if with_loop else None
    if loop is not None:
        loop.start()
    actor = "human" if session is None else f"human (browser session {session})"
    app = VigilApp(
        settings,
        opener=opener,
        clock=SystemClock(),
        readonly=readonly,
        loop=loop,
        actor=actor,
        open_task_id=task_id,
        server_pid=None if session is None else os.getppid(),
    )
    try:
        app.run()
    finally:
        grace_s = settings.dispatch.shutdown_grace_ms / 1000 + LOOP_STOP_MARGIN_S
        message = loop.stop(grace_s) if loop is not None else ""
    if session is not None:
        return ""  # the browser shows that the session ended; the server logs it
    if loop is None:
        # Whether a loop runs elsewhere is not known here: say only what this TUI did.
        return "the TUI closed; it started no loop, so any `vigil run` elsewhere keeps running"
    return message
