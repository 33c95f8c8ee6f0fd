"""``vigil tui --with-loop``: the dispatch loop as a background child process.

The loop runs as ``python -m vigil --home HOME run`` in its own session, its
output appended to ``logs/loop.out``. Quitting the TUI stops it gracefully with
SIGTERM: the loop finishes its shutdown (requeueing or recording the task in
flight) within its grace period; only if it is still alive after
``stop_timeout_s`` is it killed.

If the TUI goes away without quitting (the terminal closed, an ssh connection
dropped, a kill), the loop keeps working: being in a session of its own, it gets
neither the terminal's SIGHUP nor its Ctrl-C, and nothing ties its life to the
TUI's. ``vigil status`` shows it; ``kill PID`` stops it gracefully.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

EXITED = "✗ background loop exited"


class BackgroundLoop:
    def __init__(self, home: Path, logs_dir: Path) -> None:
        self.home = home
        self.log_path = logs_dir / "loop.out"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> int:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "vigil", "--home", str(self.home), "run"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # not the terminal's: its SIGHUP and Ctrl-C reach only the TUI
            )
        return self._proc.pid

    def exit_code(self) -> int | None:
        """None while it runs (or was never started)."""
        return None if self._proc is None else self._proc.poll()

    def label(self) -> str:
        """What the header says about the loop: while it runs, how (said after the
        loop's state); once it exited, ``EXITED`` first, the code and the log (the
        header puts that before anything else, so a narrow terminal shows it)."""
        if self._proc is None:
            return "separate process (not started here)"
        code = self._proc.poll()
        if code is None:
            return f"background process (pid {self._proc.pid})"
        try:
            log = self.log_path.relative_to(self.home)
        except ValueError:
            log = self.log_path
        return f"{EXITED} with code {code}; see {log}"

    def stop(self, timeout_s: float) -> str:
        """SIGTERM, wait, then SIGKILL as a last resort. Returns what happened."""
        proc = self._proc
        if proc is None:
            return "the loop was not started by this TUI; it keeps running if it runs elsewhere"
        if proc.poll() is not None:
            return f"the background loop (pid {proc.pid}) had already exited with code {proc.returncode}"
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return (
                f"stopped the background loop (pid {proc.pid}): it ignored SIGTERM for {timeout_s:.0f}s and was killed"
            )
        return f"stopped the background loop (pid {proc.pid}) with SIGTERM; it exited with code {code}"
