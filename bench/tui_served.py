"""The served dashboard (``vigil tui --serve``) against the terminal one, on a home
with 1,000,000 tasks (``--quick``: 50,000), 10,000 of them open.

In the same run, on the same database, the same key (``s``: the next sort, which
reads a new window of the open tasks from the store and redraws every row) is
pressed in a real ``vigil tui`` in tmux and in the served dashboard in headless
Chromium, turn about, and timed from the key sent to the first change of the
screen the person sees: tmux's pane (read with ``capture-pane``) and the browser's
terminal (the websocket's frames, through a terminal emulator; as
``tests/tui/browser.py`` reads it). Both are polled from outside every ~2 ms, so
the figures include the cost of looking; the ratio is p95 browser / p95 terminal
(target ≤ 1.5×).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import command_line, heading, machine, median, percentile, record, workload_args
from bench.million import build

FULL_TASKS = 1_000_000
QUICK_TASKS = 50_000
OPEN_TASKS = 10_000
ROUNDS = 40
QUICK_ROUNDS = 6
RATIO_TARGET = 1.5
POLL_S = 0.002
SETTLE_S = 0.4  # a screen unchanged this long has finished answering the key
SAFETY_S = 120.0


def _settled(read: Callable[[], str]) -> str:
    """The screen once it has stopped changing for ``SETTLE_S``."""
    last, since = read(), time.monotonic()
    while time.monotonic() - since < SETTLE_S:
        time.sleep(0.02)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
    return last


class Terminal:
    """``vigil tui`` in a tmux server of its own."""

    def __init__(self, folder: Path, home: Path, columns: int, rows: int) -> None:
        self.socket = folder / "tmux.sock"
        command = f"env -u COLUMNS -u LINES TERM=xterm-256color {sys.executable} -m vigil --home {home} tui"
        self.tmux("new-session", "-d", "-s", "bench", "-x", str(columns), "-y", str(rows), command)

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, check=True)
        return done.stdout

    def text(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "bench")

    def press(self, key: str) -> None:
        self.tmux("send-keys", "-t", "bench", key)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True, check=False)


def measure(home: Path, folder: Path, rounds: int) -> tuple[list[float], list[float], tuple[int, int]]:
    """Seconds from key to changed screen, terminal and browser, and the size both had."""
    from tests.tui.browser import Screen, Served, chromium, until
    from vigil.dashboard_access import make_token

    served = Served(home)
    token = make_token(home)
    terminal: Terminal | None = None
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1100, "height": 760})
            screen = Screen(page)
            screen.attach()
            page.goto(f"{served.url}/?token={token}")
            screen.wait_for("open task", timeout_s=SAFETY_S)
            assert screen.size is not None
            columns, rows = screen.size
            terminal = Terminal(folder, home, columns, rows)
            started = terminal
            until(lambda: "open task" in started.text(), "the terminal's queue", SAFETY_S)
            page.locator(".xterm-screen").click()
            in_terminal: list[float] = []
            in_browser: list[float] = []
            shown_in = terminal  # for the closures below: not None from here on

            def in_tmux() -> None:
                in_terminal.append(_timed(shown_in.text, lambda: shown_in.press("s")))

            def in_chromium() -> None:
                in_browser.append(_timed(screen.text, lambda: page.keyboard.press("s")))

            for n in range(rounds):  # turn about, so that load from elsewhere lands on both
                for run in (in_tmux, in_chromium) if n % 2 == 0 else (in_chromium, in_tmux):
                    run()
            return in_terminal, in_browser, (columns, rows)
    finally:
        if terminal is not None:
            terminal.close()
        served.stop()
        served.close()


def _timed(read: Callable[[], str], press: Callable[[], None]) -> float:
    """From the key sent to the first change of the screen (the press included)."""
    before = _settled(read)
    start = time.monotonic()
    press()
    while read() == before:
        if time.monotonic() - start > SAFETY_S:
            raise RuntimeError("the screen never changed after the key")
        time.sleep(POLL_S)
    return time.monotonic() - start


def main() -> None:
    args = workload_args(__doc__.splitlines()[0])
    total = QUICK_TASKS if args.quick else FULL_TASKS
    rounds = QUICK_ROUNDS if args.quick else ROUNDS
    where = machine()
    heading(f"Served dashboard vs terminal on {total:,} tasks ({OPEN_TASKS:,} open)")
    if shutil.which("tmux") is None:
        print("skipped: tmux is not installed")
        return
    from tests.tui.browser import browser_missing

    if (missing := browser_missing()) is not None:
        print(f"skipped: {missing}")
        return
    with tempfile.TemporaryDirectory(prefix="vigil-bench-served-") as name:
        from vigil.config import load_settings
        from vigil.home import init_home

        folder = Path(name)
        home = folder / "home"
        init_home(home)
        t0 = time.monotonic()
        build(load_settings(home).store.path, total=total, open_tasks=OPEN_TASKS, now_ms=int(time.time() * 1000))
        build_s = time.monotonic() - t0
        in_terminal, in_browser, size = measure(home, folder, rounds)
    p95_t, p95_b = percentile(in_terminal, 95), percentile(in_browser, 95)
    ratio = p95_b / p95_t
    met = "met" if ratio <= RATIO_TARGET else "not met"

    def row(label: str, values: list[float]) -> str:
        ms = [v * 1000 for v in values]
        return f"| {label} | p50 {median(ms):.0f} ms, p95 {percentile(ms, 95):.0f} ms, max {max(ms):.0f} ms |"

    markdown = "\n".join(
        [
            f"Command: `{command_line()}`. Machine: {where}.",
            "",
            "| measure | result |",
            "|---|---|",
            f"| database | {total:,} tasks, {OPEN_TASKS:,} open (built in {build_s:.1f} s, not part of the figures) |",
            f"| screen | {size[0]}×{size[1]} cells, both |",
            row(f"key `s` → screen changed, terminal (tmux) ({len(in_terminal)} presses)", in_terminal),
            row(f"key `s` → screen changed, browser (Chromium) ({len(in_browser)} presses)", in_browser),
            f"| ratio of the p95s, browser / terminal | {ratio:.2f}× (target ≤ {RATIO_TARGET}×: {met}) |",
        ]
    )
    print(markdown)
    if args.record and not record("tui_served", markdown):
        print("docs/performance.md has no <!-- bench:tui_served --> markers; nothing recorded")


if __name__ == "__main__":
    main()
