"""The ``vigil`` command: parse, build settings, call one function, map errors.

This package is a composition root: it may import every package, but only inside
the command that needs it, so ``vigil task add`` never pays for Textual or
APScheduler. A ``VigilError`` becomes one line on stderr and its exit code (2 for
bad input, 1 for a failed operation); a traceback reaching a user is a bug.

Each module registers its commands on the ``vigil`` group (``root.main``); importing
this package imports them all::

    root.py        the vigil group (errors → one line and an exit code), vigil init
    base.py        what every command uses: CliState, settings and the store, fail,
                   who is asking, bounded numbers, coloured verdicts
    tasks.py       vigil task …: add (and --from), list, show, steer, close, ask,
                   answer, unblock, approve, reject, diff, open
    reports.py     vigil events, vigil stats
    loop.py        vigil run, dispatch once, mcp, status, doctor, service, pause, resume
    store.py       vigil store prune/migrate, vigil backup, vigil restore
    sensors.py     vigil sensors …
    alerts.py      vigil alerts test/check
    chat.py        vigil chat pair/unpair/run
    dashboard.py   vigil tui
"""

from vigil.cli import alerts, chat, dashboard, loop, reports, sensors, store, tasks
from vigil.cli.root import main

__all__ = ["alerts", "chat", "dashboard", "loop", "main", "reports", "sensors", "store", "tasks"]
