"""What every screen needs from the app, passed down explicitly.

``store`` may be replaced while the app runs (the database file was replaced and
reopened), so screens read ``ctx.store`` at each use instead of keeping it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from tui.loop_state import LoopState
from tui.times import Times
from vigil.clock import Clock
from vigil.config import Settings
from vigil.store import Store

log = logging.getLogger("vigil.tui")


@dataclass
class Context:
    store: Store
    clock: Clock
    settings: Settings
    readonly: bool = False
    # Who the dashboard's writes are audited as: "human", or for a browser session
    # of `vigil tui --serve`, "human (browser session <id>)".
    actor: str = "human"
    loop_label: str = ""  # how the loop runs: "background process (pid N)" or elsewhere
    home_label: str = ""  # the home watched, short (~/agent): the tab bar and the terminal title say it
    loop_paused: bool = False  # the loop's gate is closed (paused or gated): L resumes
    banner: str = ""  # a problem with the database, shown on every screen ("" = none)
    times: Times = field(default_factory=Times)  # local time or UTC (z switches)
    loop: LoopState | None = None  # what the loop does, for the loop line (None: not read yet)
    # The TUI's writes run one at a time, so a step (raise, lower) starts from what the
    # previous one left, however fast the keys come.
    writes: asyncio.Lock = field(default_factory=asyncio.Lock)
