"""Keypress → screen on the queue at a million tasks, and a drain under the open
dashboard: the parts of ``bench.tui_million`` that drive keys and a real loop.

A keypress is timed from the key sent to the app, as the terminal driver sends
it, to the screen showing its answer (the store's new window applied, or the task
screen loaded) and painted. Pilot's own waits between keys are not timed. The
drain runs a real ``vigil run`` (dry run) in another process and counts the CPU
this process, the dashboard, spends meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from textual import events

from bench.harness import cpu_seconds

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from tui.app import VigilApp

# What a person types in the filter box, over the million tasks' open ones (bench.million).
FILTERS = ("task 99", "skill:web", "status:blocked", "pri<3 open", "id:999950", "source:sensor:bulk open task 1")


class KeyFigures(TypedDict):
    """Seconds from key to screen, one per press, by what the key does; and the
    CPU seconds this process used for each (its threads included: the store's)."""

    filter: list[float]
    sort: list[float]
    page_down: list[float]
    open_task: list[float]
    cpu: dict[str, list[float]]


CPU_USED: list[float] = []  # CPU seconds of each timed press, in order


SAFETY_S = 120.0  # a wait that long is a broken run, not a figure
DRAIN_SAFETY_S = 900.0


async def _until(condition: Callable[[], bool], pilot: Pilot[Any], safety_s: float = SAFETY_S) -> None:
    deadline = time.monotonic() + safety_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the screen never showed what was waited for ({safety_s:.0f} s)")
        await asyncio.sleep(0.001)
    await pilot.pause()  # painted


async def press_and_time(pilot: Pilot[Any], keys: tuple[str, ...], shown: Callable[[], bool]) -> float:
    """Send the key as the terminal driver would, wait for the screen's state to show
    the answer, then paint it; Pilot's own waits for an idle process (20 ms steps)
    are left out, since a person's terminal has none."""
    app = pilot.app
    driver = app._driver
    assert driver is not None
    start, cpu = time.monotonic(), time.process_time()
    for key in keys:
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(app)
        driver.send_message(event)
    while not shown():
        if time.monotonic() - start > SAFETY_S:
            raise RuntimeError(f"the screen never answered {keys}")
        await asyncio.sleep(0.0005)
    app.screen._on_timer_update()  # paint now what the next frame would
    elapsed, used = time.monotonic() - start, time.process_time() - cpu
    await pilot.pause()  # let the rest settle before the next key (not timed)
    CPU_USED.append(used)
    return elapsed


async def time_keys(app: VigilApp, pilot: Pilot[Any], rounds: int) -> KeyFigures:
    """Each key ``rounds`` times on the queue screen, which shows the first window."""
    from textual.widgets import Input

    from tui.task_screen import TaskScreen

    screen = app.queue_screen
    figures = KeyFigures(filter=[], sort=[], page_down=[], open_task=[], cpu={})

    def applied(after: int) -> Callable[[], bool]:
        return lambda: screen.loads > after and not screen.refreshing

    for n in range(rounds):
        # filter: the last letter of a filter typed into the box (as you type)
        await pilot.press("slash")
        box = screen.query_one("#filter", Input)
        text = FILTERS[n % len(FILTERS)]
        box.value = text[:-1]
        await _until(applied(screen.loads - 1), pilot)
        figures["filter"].append(await press_and_time(pilot, (text[-1],), applied(screen.loads)))
        box.value = ""
        await pilot.press("escape")
        await _until(lambda: screen.filter.is_empty and not screen.refreshing, pilot)
        # sort: s, by priority over every open task (then back to the dispatch order)
        figures["sort"].append(await press_and_time(pilot, ("s",), applied(screen.loads)))
        while screen.sort_by is not None:
            await pilot.press("s")
        await _until(lambda: not screen.refreshing, pilot)
        # page down: from the top, a page at a time; every few presses cross the window
        await pilot.press("g")
        await _until(lambda: screen.window_start == 0 and not screen.refreshing, pilot)
        for _ in range(3):
            row, start = screen.table.cursor_row, screen.window_start

            def moved(row: int = row, start: int = start) -> bool:
                return not screen.refreshing and (screen.table.cursor_row != row or screen.window_start != start)

            figures["page_down"].append(await press_and_time(pilot, ("pagedown",), moved))
        # open task: enter on the highlighted row, until its screen has loaded
        figures["open_task"].append(
            await press_and_time(
                pilot, ("enter",), lambda: isinstance(app.screen, TaskScreen) and app.screen.loads >= 1
            )
        )
        await pilot.press("escape")
        # the CPU of this round's presses, in the order they were timed above
        used = CPU_USED[-6:]
        CPU_USED.clear()
        for what, sample in zip(
            ("filter", "sort", "page_down", "page_down", "page_down", "open_task"), used, strict=True
        ):
            figures["cpu"].setdefault(what, []).append(sample)
    return figures


class DrainFigures(TypedDict):
    tasks: int
    seconds: float
    cpu_pct: float
    refreshes: int


def time_ms() -> int:
    return int(time.time() * 1000)


async def drain(home: Path, tasks: int) -> DrainFigures:
    """Open the dashboard on ``home`` (``tasks`` due tasks), start ``vigil run``, and
    measure the dashboard's CPU until the queue is empty on its screen."""
    from tui.app import VigilApp
    from vigil.clock import SystemClock
    from vigil.config import load_settings
    from vigil.store import open_store

    settings = load_settings(home)
    app = VigilApp(settings, opener=lambda: open_store(settings), clock=SystemClock())
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    async with app.run_test(size=(120, 40)) as pilot:
        screen = None
        while screen is None or screen.loads < 1:
            await asyncio.sleep(0.01)
            screen = app.queue_screen if hasattr(app, "ctx") else None
        await pilot.pause()
        loads = screen.loads
        cpu0, t0 = cpu_seconds(), time.monotonic()
        loop = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vigil", "--home", str(home), "run", env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:

            def drained() -> bool:
                snapshot = screen.snapshot
                if snapshot is not None and snapshot.health(time_ms()).gate_closed:
                    raise RuntimeError(f"the loop stopped claiming: {snapshot.health(time_ms()).summary()}")
                return snapshot is not None and not snapshot.window.total

            await _until(drained, pilot, safety_s=DRAIN_SAFETY_S)
            seconds = time.monotonic() - t0
            cpu = cpu_seconds() - cpu0
        finally:
            loop.send_signal(signal.SIGTERM)
            await asyncio.wait_for(loop.wait(), 60)

    return DrainFigures(tasks=tasks, seconds=seconds, cpu_pct=cpu / seconds * 100, refreshes=screen.loads - loads)
