"""A real headless Chromium on the served dashboard (``vigil tui --serve``).

The browser is the system's Chromium (``/usr/bin/chromium``, Debian's ``chromium``
package), driven by Playwright, which is told its path: nothing is downloaded.
The page draws the terminal on a canvas, so its text is read where the browser
gets it: every websocket frame the page receives is fed to a terminal emulator
(pyte) of the size the page asked for, whose screen is then the page's text. A tap
or a click lands on the cell where a word is drawn, turned into pixels from the
terminal's size on the page.

``Served`` runs the real ``vigil --home H tui --serve`` in a subprocess and reads
its log lines (sessions starting and ending, each app's pid).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyte

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, WebSocket

CHROMIUM = os.environ.get("VIGIL_TEST_CHROMIUM", "/usr/bin/chromium")
# Chromium as root needs --no-sandbox; the rest keep it from calling out (the network
# here reaches nothing, and its background connections would only be refused).
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
WAIT_S = 60.0  # safety net only: a condition that never holds fails here


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        return "Chromium is not installed: apt install chromium (Debian) to run the served dashboard's tests"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: pip install -e '.[dev]' to run the served dashboard's tests"
    return None


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium; Playwright gives each launch a new, empty profile folder
    of its own (and refuses a ``--user-data-dir`` argument)."""
    from playwright.sync_api import sync_playwright

    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    assert path is not None
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=path, args=list(CHROMIUM_ARGS), timeout=WAIT_S * 1000)
        try:
            yield browser
        finally:
            browser.close()


def until(condition: Callable[[], object], what: str, timeout_s: float = WAIT_S, step_s: float = 0.05) -> None:
    """Wait (polling) until ``condition()`` holds; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(step_s)


@dataclass
class Screen:
    """The terminal a page shows, rebuilt from the bytes its websocket received."""

    page: Page
    frames: list[bytes] = field(default_factory=list)
    size: tuple[int, int] | None = None  # columns, rows: what the page asked the server for
    _fed: int = 0
    _screen: pyte.Screen | None = None
    _stream: pyte.ByteStream | None = None

    def attach(self) -> None:
        self.page.on("websocket", self._opened)

    def _opened(self, websocket: WebSocket) -> None:
        found = re.search(r"width=(\d+)&height=(\d+)", websocket.url)
        if found:
            self.size = (int(found[1]), int(found[2]))
        websocket.on("framereceived", self._frame)

    def _frame(self, payload: Any) -> None:
        if isinstance(payload, bytes):
            self.frames.append(payload)

    def text(self) -> str:
        """Every row of the terminal as it is drawn now."""
        self.page.wait_for_timeout(1)  # let Playwright deliver the frames received so far
        if self.size is None:
            return ""
        if self._screen is None or (self._screen.columns, self._screen.lines) != self.size:
            self._screen = pyte.Screen(*self.size)
            self._stream = pyte.ByteStream(self._screen)
            self._fed = 0
        assert self._stream is not None
        while self._fed < len(self.frames):
            self._stream.feed(self.frames[self._fed])
            self._fed += 1
        return "\n".join(line.rstrip() for line in self._screen.display)

    def wait_for(self, wanted: str | Callable[[str], bool], timeout_s: float = WAIT_S) -> str:
        """Wait until the screen shows ``wanted`` (a text, or a test of the text)."""
        test = (lambda text: wanted in text) if isinstance(wanted, str) else wanted
        until(lambda: test(self.text()), f"the page to show {wanted!r}", timeout_s)
        return self.text()

    def where(self, word: str, after: str | None = None) -> tuple[int, int]:
        """(column, row) of the middle of the first ``word`` on the screen (after the
        first line that contains ``after``, when given)."""
        lines = self.text().split("\n")
        start = 0
        if after is not None:
            start = next(n for n, line in enumerate(lines) if after in line)
        for row, line in enumerate(lines[start:], start=start):
            column = line.find(word)
            if column >= 0:
                return column + len(word) // 2, row
        raise AssertionError(f"{word!r} is not on the screen:\n{self.text()}")

    def pixel(self, column: int, row: int) -> tuple[float, float]:
        """The page's coordinates of the middle of a terminal cell."""
        assert self.size is not None
        box = self.page.locator(".xterm-screen").bounding_box()
        assert box is not None
        cell_w, cell_h = box["width"] / self.size[0], box["height"] / self.size[1]
        return box["x"] + (column + 0.5) * cell_w, box["y"] + (row + 0.5) * cell_h

    def tap(self, word: str, after: str | None = None) -> None:
        """Touch the word where it is drawn (a phone's finger: a touch event)."""
        self.page.touchscreen.tap(*self.pixel(*self.where(word, after)))

    def click(self, word: str, after: str | None = None) -> None:
        self.page.mouse.click(*self.pixel(*self.where(word, after)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """``vigil tui --serve`` in a subprocess of its own, its log read as it comes."""

    def __init__(self, home: Path, *args: str) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "tui", "--serve", "--port", str(self.port), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        until(lambda: any("serving the dashboard at" in line for line in self.lines) or self.process.poll() is not None,
              "the server to listen")  # fmt: skip
        if self.process.poll() is not None:
            raise AssertionError(f"vigil tui --serve exited {self.process.returncode}: {self.log}")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app_pids(self) -> list[int]:
        """The app processes its log says it started."""
        return [int(m[1]) for line in self.lines if (m := re.search(r"app process pid (\d+)", line))]

    def children(self) -> list[int]:
        """The server's child processes now."""
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return [int(pid) for pid in path.read_text().split()]
        except FileNotFoundError:
            return []

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Send ``sig`` and wait for the server to exit; its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=WAIT_S)
        finally:
            self._reader.join(timeout=WAIT_S)

    def close(self) -> None:
        """Kill the server if it still runs; close its pipe."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=WAIT_S)
        if self.process.stdout is not None:
            self.process.stdout.close()


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"
