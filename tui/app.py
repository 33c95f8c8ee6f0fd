"""The Textual app: a thin shell that owns the store, the probe and the screens.

Screens are installed once and switched with 1–5 (each keeps its state). ``L``
pauses or resumes the loop from any screen, through the same ``vigil.gate``
functions as ``vigil pause`` and ``vigil resume``. Every
``PROBE_INTERVAL_S`` the app asks the ``DatabaseWatcher`` whether another process
committed, or whether the dispatcher lanes' locks changed (a ``vigil run``
killed changes nothing in the database); only then does the screen in front
reload. Problems with
the database (locked, missing, replaced) show in a banner until they clear.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import Screen

from tui.context import Context, log
from tui.costs_screen import CostsScreen
from tui.dialogs import ConfirmDialog, HelpScreen
from tui.forms import ReasonForm
from tui.history_screen import HistoryScreen
from tui.keybar import KeyBar, now_labels
from tui.keys import KeyInfo, screen_keys
from tui.live import LiveScreen
from tui.loop_process import BackgroundLoop
from tui.loop_state import LanesWatch, load_loop
from tui.needs_you_screen import NARROW_COLUMNS, NeedsYouScreen
from tui.queue_screen import QueueScreen
from tui.safety import guard_handlers, guarded
from tui.sensors_screen import SensorsScreen
from tui.tabs import LoopLine
from tui.times import Times
from tui.watcher import DatabaseWatcher
from vigil.clock import Clock
from vigil.config import Settings
from vigil.gate import GateState, pause, read_gate, resume
from vigil.logfile import private_log_handler
from vigil.printable import printable, printable_values
from vigil.store import Store

PROBE_INTERVAL_S = 0.3
LOOP_STOP_MARGIN_S = 10.0  # beyond the loop's own shutdown grace before it is killed
SERVER_CHECK_S = 2.0  # how often a browser session looks whether its server is still there


class VigilApp(App[str]):
    """The dashboard. It exits with "" (the caller stops a background loop it
    started, and says so)."""

    CSS_PATH = "vigil.tcss"
    TITLE = "Vigil"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "show('queue')", "Queue", show=False, tooltip="Queue screen: open tasks in dispatch order"),
        Binding("2", "show_task", "Task", show=False, tooltip="Task screen of the highlighted task"),
        Binding("3", "show('history')", "History", show=False, tooltip="History screen: finished tasks"),
        Binding("4", "show('sensors')", "Sensors", show=False, tooltip="Sensors screen"),
        Binding("5", "show('costs')", "Costs", show=False, tooltip="Costs screen: spend per day, skill, model"),
        Binding("6", "show('needs')", "Needs you", show=False, tooltip="Needs you: what waits for a person, by touch"),
        Binding("z", "toggle_utc", "UTC/local", show=False, tooltip="show times in UTC, or in local time again"),
        Binding("L", "loop_gate", "Pause loop", tooltip="Pause the loop, or resume it when paused or gated"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Help: every key of this screen"),
        # ? types into a text box: F1 is Help there too (the footer shows it then)
        Binding("f1", "help", "Help", key_display="F1", show=False),
        Binding("q", "quit_app", "Quit", tooltip="Quit (asks first if it started the loop)"),
        Binding("ctrl+q", "quit_app", "Quit", priority=True, key_display="^q", show=False),
        Binding("ctrl+c", "quit_app", "Quit", priority=True, key_display="^c", show=False),
    ]

    def __init__(
        self,
        settings: Settings,
        *,
        opener: Callable[[], Awaitable[Store]],
        clock: Clock,
        readonly: bool = False,
        loop: BackgroundLoop | None = None,
        probe_interval_s: float = PROBE_INTERVAL_S,
        actor: str = "human",
        open_task_id: int | None = None,
        server_pid: int | None = None,
    ) -> None:
        """``opener`` opens the store; the app calls it inside its own event loop
        (on mount, and again when the database file was replaced). ``actor``: who
        its writes are audited as; ``open_task_id``: a task to show first (a link
        from a notification). ``server_pid``: this app is a browser session of that
        ``vigil tui --serve`` process and exits once it is gone (killed, crashed):
        textual's web driver keeps an app whose server died running, its input at
        end of file, holding the database for no one."""
        super().__init__()
        self.settings = settings
        self.opener = opener
        self.clock = clock
        self.readonly = readonly
        self.loop = loop
        self.probe_interval_s = probe_interval_s
        self.actor = actor
        self.open_task_id = open_task_id
        self.server_pid = server_pid
        self.ctx: Context
        self.watcher: DatabaseWatcher
        self.lanes: LanesWatch
        self._probing = False
        self.notices: deque[str] = deque(maxlen=200)  # every notification shown, newest last

    def _exit_without_server(self) -> None:
        if os.getppid() != self.server_pid:  # the server died: this process was handed to init
            log.info("browser session: its server (pid %d) is gone; exiting", self.server_pid)
            self.exit()

    async def on_mount(self) -> None:
        if self.server_pid is not None:
            self.set_interval(SERVER_CHECK_S, self._exit_without_server)
        store = await self.opener()
        times = Times(self.settings.tui.timezone)
        self.ctx = Context(
            store=store, clock=self.clock, settings=self.settings, readonly=self.readonly, times=times, actor=self.actor
        )
        self.ctx.home_label = home_label(self.settings.home)
        self.title = f"vigil — {self.ctx.home_label}"
        self._set_terminal_title(self.title)
        file = self.settings.store.path if self.settings.store.url is None else None
        self.watcher = DatabaseWatcher(store, file, self.opener)
        self.lanes = LanesWatch(self.settings)
        await self.watcher.probe()  # the first load comes from showing the screen, not the probe
        await self.lanes.changed()  # what the locks say before the first load reads them
        self.install_screen(QueueScreen(self.ctx), "queue")
        self.install_screen(HistoryScreen(self.ctx), "history")
        self.install_screen(SensorsScreen(self.ctx), "sensors")
        self.install_screen(CostsScreen(self.ctx), "costs")
        self.install_screen(NeedsYouScreen(self.ctx), "needs")
        self._label_loop()
        await self._read_loop_gate()
        # A phone's browser (60 columns or fewer) opens on what waits for a person.
        await self.push_screen("needs" if self.size.width <= NARROW_COLUMNS else "queue")
        if self.open_task_id is not None:
            from tui.task_screen import open_task

            open_task(self, self.ctx, self.open_task_id)
        self.set_interval(self.probe_interval_s, self.probe)
        if self.loop is not None:
            self.set_interval(2.0, self._label_loop)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Show a notification and keep its text (the log and the tests read it)."""
        self.notices.append(message)
        log.info("notice (%s): %s", severity, message)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    async def on_unmount(self) -> None:
        if hasattr(self, "ctx"):
            await self.ctx.store.close()

    @property
    def queue_screen(self) -> QueueScreen:
        screen = self.get_screen("queue")
        assert isinstance(screen, QueueScreen)
        return screen

    def _label_loop(self) -> None:
        """How the loop runs, for the loop line: a background process this TUI
        started (and whether it dispatches or stands by), or one elsewhere."""
        if self.loop is None:
            self.ctx.loop_label = "separate process (vigil run)"
            return
        label = self.loop.label()
        state = self.ctx.loop
        if self.loop.exit_code() is None and self.loop.pid is not None and state is not None:
            health = state.health(self.clock.now_ms())
            role = health.role_of(self.loop.pid)
            if role == "standby":
                beat = health.heartbeat
                holder = f"pid {beat.pid}" if beat is not None and health.dispatching else "another vigil run"
                label += f" on standby: {holder} has the lane"
            elif role is None:
                label += ", starting"
        self.ctx.loop_label = label

    def _set_terminal_title(self, title: str) -> None:
        """``vigil — ~/agent`` in the terminal's title bar (an OSC sequence; nothing
        under a headless test driver)."""
        driver = self._driver
        if driver is not None and not self.is_headless:
            driver.write(f"\x1b]2;{title}\x07")

    # --- refresh ------------------------------------------------------------------------
    @guarded("checking the database")
    async def probe(self) -> None:
        if self._probing:
            return  # the previous probe still waits on a locked database
        self._probing = True
        try:
            result = await self.watcher.probe()
            lanes_changed = await self.lanes.changed()
        finally:
            self._probing = False
        if result.reopened:
            self.ctx.store = self.watcher.store
            log.warning("database file replaced; reopened %s", self.ctx.settings.store.path)
        self.show_banner(result.problem or "")
        if result.changed or (lanes_changed and result.problem is None):
            await self._read_loop_gate()
            self.data_changed()

    async def _read_loop_gate(self) -> None:
        """Keep ``ctx.loop`` (every screen's loop line) and ``ctx.loop_paused`` (the
        ``L`` key's label) true to the store."""
        self.ctx.loop = await load_loop(self.ctx.store, self.settings)
        self._label_loop()
        for line in self.screen.query(LoopLine):
            line.show_state()
        paused = self.ctx.loop.paused(self.clock.now_ms())
        if paused != self.ctx.loop_paused:
            self.ctx.loop_paused = paused
            for bar in self.screen.query(KeyBar):
                bar.render_keys()

    def data_changed(self) -> None:
        screen = self.screen
        if isinstance(screen, LiveScreen):
            screen.data_changed()

    def show_banner(self, text: str) -> None:
        """Every screen shows ``ctx.banner``; the one in front is updated now, the
        others when they are shown again."""
        if text == self.ctx.banner:
            return
        self.ctx.banner = text
        if isinstance(self.screen, LiveScreen):
            self.screen.show_banner()
        if text:
            log.warning("%s", text)
        else:
            log.info("database usable again")

    # --- navigation -----------------------------------------------------------------------
    def action_show(self, name: str) -> None:
        while len(self.screen_stack) > 2:  # close task screens and dialogs first
            self.pop_screen()
        if self.screen is not self.get_screen(name):
            self.switch_screen(name)

    def action_show_task(self) -> None:
        self.action_show("queue")
        self.queue_screen.action_open()

    def action_toggle_utc(self) -> None:
        times = self.ctx.times
        times.utc = not times.utc
        self.notify("times in UTC (z: local time)" if times.utc else "times in local time (z: UTC)", markup=False)
        for screen in self.screen_stack:
            if isinstance(screen, LiveScreen) and screen.is_attached:
                screen.times_changed()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(screen_keys(self.screen), now_labels(self.ctx)))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """Every Vigil action and screen of ``screen`` (the one the palette was opened
        on), named with its key, then Textual's own commands but its Quit and Keys
        (ours are in the list: quitting asks first when it started the loop)."""
        labels = now_labels(self.ctx)
        for key in screen_keys(screen):
            if key.group == "Table and text":
                continue
            label = labels.get(key.name, key.label)
            help_text = key.help if key.enabled else f"{key.help} (does not apply now)"
            yield SystemCommand(f"{label} ({key.shown})", help_text, self._palette_runner(key, label))
        for command in super().get_system_commands(screen):
            if command.title not in ("Quit", "Keys"):
                yield command

    def _palette_runner(self, key: KeyInfo, label: str) -> Callable[[], None]:
        def run() -> None:
            if key.enabled:
                self.call_later(self.run_action, key.action, key.node)
            else:
                self.notify(f"{label} does not apply to the highlighted task", markup=False)

        return run

    # --- the loop gate (vigil pause / vigil resume) ------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # False hides the key: a read-only TUI never writes.
        return not (action == "loop_gate" and self.readonly)

    def action_loop_gate(self) -> None:
        self.run_worker(self._ask_loop_gate(), group="loop-gate", exit_on_error=False)

    @guarded("reading the loop's state")
    async def _ask_loop_gate(self) -> None:
        """Pause a running loop (asking for an optional reason), or resume a paused or
        gated one, after a confirmation. The gate is read afresh, not from a screen."""
        gate = printable_values(await read_gate(self.ctx.store))  # its reason may quote the agent
        if gate.is_open(self.clock.now_ms()):
            title = Text("Pause the loop?", style="bold")
            title.append("\nThe dispatcher stops claiming tasks; sensors keep running and a running task finishes.")

            def paused(reason: str | None) -> None:
                if reason is not None:
                    self.run_worker(self._set_loop_gate(reason), group="loop-gate", exit_on_error=False)

            form = ReasonForm(title, label="Reason (optional; shown in vigil status and the header)", required=False)
            self.push_screen(form, paused)
            return
        question = Text(f"Resume the loop? It is {gate.state}", style="bold")
        question.append(Text(f": {gate.reason}" if gate.reason else ""))
        question.append("\nThe dispatcher claims tasks again.")

        def resumed(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._set_loop_gate(None), group="loop-gate", exit_on_error=False)

        self.push_screen(ConfirmDialog(question), resumed)

    @guarded("changing the loop's state")
    async def _set_loop_gate(self, pause_reason: str | None) -> None:
        """``pause_reason`` None resumes; a string (maybe empty) pauses."""
        now = self.clock.now_ms()
        if pause_reason is not None:
            await pause(self.ctx.store, reason=pause_reason, by=self.ctx.actor, now_ms=now)
            why = f": {pause_reason}" if pause_reason else ""
            self.notify(f"loop paused{why}; a running task finishes; L resumes", markup=False)
        else:
            before = await resume(self.ctx.store, by=self.ctx.actor, now_ms=now)
            if before.state is GateState.RUNNING:
                self.notify("the loop was already running", markup=False)
            else:
                self.notify(printable(f"loop resumed (was {before.state}: {before.reason})"), markup=False)
        await self._read_loop_gate()
        if isinstance(self.screen, LiveScreen):
            self.screen.reload()  # our own commit does not move our data_version

    def action_quit_app(self) -> None:
        if self.loop is None or self.loop.exit_code() is not None:
            self.exit("")
            return
        question = Text(
            f"Quit? The loop this TUI started (pid {self.loop.pid}) will be stopped gracefully with SIGTERM:"
            " it finishes its shutdown and puts a running task back in the queue."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit("")

        self.push_screen(ConfirmDialog(question), answered)


def home_label(home: Path) -> str:
    """The home, short: ``~/agent`` under the user's home folder, else its path."""
    try:
        return "~/" + str(home.resolve().relative_to(Path.home().resolve()))
    except (ValueError, RuntimeError):
        return str(home)


def configure_logging(path: Path, pass_env: Iterable[str] = ()) -> None:
    """Log the TUI's warnings and errors to a file (the screen is not a log): 0600,
    secrets masked, rotated at 1 MB."""
    handler = private_log_handler(path, max_bytes=1024 * 1024, backups=2, pass_env=pass_env)
    log.addHandler(handler)
    log.setLevel(logging.INFO)


# Actions only: a failure to open the store on mount must end the app with its error.
guard_handlers(VigilApp, ("action_",))
