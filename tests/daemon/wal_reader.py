"""A reader that never pauses: read transactions back to back, each holding its
snapshot a moment, until killed (as the TUI, status calls and many CLI processes
do together). Usage: ``python -m tests.daemon.wal_reader DB``; prints ``ready``
once its first transaction has read."""

from __future__ import annotations

import sqlite3
import sys
import time

HOLD_S = 0.002  # each snapshot is held this long: short, like Vigil's own reads


def main() -> None:
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    ready = False
    while True:
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM tasks").fetchone()
        time.sleep(HOLD_S)
        conn.execute("COMMIT")
        if not ready:
            print("ready", flush=True)
            ready = True


if __name__ == "__main__":
    main()
