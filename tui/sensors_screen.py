"""The sensors screen (key 4): each sensor's schedule and health.

Stale sensors (enabled, and overdue by more than ``STALE_GRACE_MS`` or failing)
are highlighted; "skipped" is the latest stretch of runs a sensor did not make
(``vigil sensors skips`` lists them all). ``r`` runs one now by starting ``vigil sensors run NAME`` as a
separate process (the TUI never blocks on it; its result is notified); ``e``
enables or disables it in the store.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from tui.cells import one_line
from tui.context import Context
from tui.keybar import KeyBar
from tui.live import Banner, LiveScreen
from tui.loaders import load_sensors
from tui.safety import guarded
from tui.tabs import LoopLine, TabBar
from tui.times import relative
from vigil.config import sensor_name
from vigil.models import SensorState

STALE_GRACE_MS = 120_000
RUN_NOW_TIMEOUT_S = 300


def schedules(entries: tuple[Mapping[str, Any], ...]) -> dict[str, str]:
    """Sensor name → schedule text, from the raw ``[[sensors]]`` tables (read, not
    imported: the TUI never runs user sensor code). An entry without ``every`` or
    ``cron`` runs on its built-in sensor's own schedule (``inbox``: every 30s);
    the built-ins are Vigil's code, so theirs is read from them. Imports the
    built-in sensors (httpx …): call it off the event loop."""
    result = {}
    for entry in entries:
        name = sensor_name(entry)
        if name is not None:
            if entry.get("every"):
                result[name] = f"every {entry['every']}"
            elif entry.get("cron"):
                result[name] = f"cron {entry['cron']}"
            else:
                result[name] = builtin_schedule(entry.get("use"))
    return result


def builtin_schedule(use: object) -> str:
    """The default schedule of the built-in sensor ``use`` ("—" for another)."""
    from sensors.api import meta_of
    from sensors.builtin import BUILTINS

    func = BUILTINS.get(use) if isinstance(use, str) else None
    if func is None:
        return "—"
    meta = meta_of(func)
    if meta.every is not None:
        return f"every {meta.every}"
    return "—" if meta.cron is None else f"cron {meta.cron}"


def with_configured(states: tuple[SensorState, ...], entries: tuple[Mapping[str, Any], ...]) -> tuple[SensorState, ...]:
    """The configured sensors' stored states plus a "never ran" row for each without
    one; a sensor removed from the config (its state still stored) is left out."""
    configured = {name for entry in entries if (name := sensor_name(entry)) is not None}
    states = tuple(s for s in states if s.name in configured)
    known = {s.name for s in states}
    extra = []
    for entry in entries:
        name = sensor_name(entry)
        if name is not None and name not in known:
            known.add(name)
            extra.append(
                SensorState(
                    name=name, enabled=entry.get("enabled", True) is not False, last_run_at=None,
                    last_duration_ms=None, last_status=None, last_error=None, consecutive_failures=0,
                    created_last=0, ignored_last=0, dropped_last=0, next_due_at=None,
                )
            )  # fmt: skip
    return tuple(sorted((*states, *extra), key=lambda s: s.name))


def is_stale(state: SensorState, now_ms: int) -> bool:
    if not state.enabled:
        return False
    overdue = state.next_due_at is not None and now_ms - state.next_due_at > STALE_GRACE_MS
    return overdue or state.consecutive_failures > 0


def next_due_cell(state: SensorState, now_ms: int, style: str) -> Text:
    """When the sensor runs next; a disabled one does not run, whatever was planned."""
    if not state.enabled:
        return Text("disabled", style="dim")
    return Text(relative(state.next_due_at, now_ms) if state.next_due_at else "—", style=style)


def skipped_cell(state: SensorState) -> Text:
    """The latest runs not made: ``3 downtime``; ``—`` when none ever were."""
    if not state.skips:
        return Text("—", style="dim")
    latest = state.skips[-1]
    return Text(f"{latest.runs} {latest.reason}", style="yellow" if latest.reason != "disabled" else "dim")


@dataclass(frozen=True)
class SensorsView:
    """Every sensor's state, and its schedule by name."""

    states: tuple[SensorState, ...]
    plans: dict[str, str]


class SensorsScreen(LiveScreen[SensorsView]):
    TITLE = "Sensors"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "run_now", "Run now", tooltip="run the sensor now, as `vigil sensors run NAME`"),
        Binding("e", "toggle_enabled", "Enable/disable", tooltip="enable or disable the sensor"),
    ]

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx, name="sensors")
        self.states: tuple[SensorState, ...] = ()
        self._plans: dict[str, str] | None = None  # read once: vigil.toml does not change under the TUI

    def compose(self) -> ComposeResult:
        yield Banner()
        yield TabBar("sensors", self.ctx.home_label)
        yield LoopLine(self.ctx)
        yield Static(Text("Sensors", style="bold"))
        yield DataTable[Text](id="sensors", cursor_type="row", zebra_stripes=True)
        yield Static(id="error")
        yield KeyBar(self.ctx)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        columns = ("name", "on", "schedule", "last run", "status", "next due", "new/ignored", "fails", "skipped")
        for key in (*columns, "last error"):
            table.add_column(key, key=key)
        table.focus()

    async def load(self) -> SensorsView:
        states = with_configured(await load_sensors(self.ctx.store), self.ctx.settings.sensors)
        if self._plans is None:
            self._plans = await asyncio.to_thread(schedules, self.ctx.settings.sensors)
        return SensorsView(states, self._plans)

    def apply(self, data: SensorsView) -> None:
        self.states = data.states
        table = self.query_one(DataTable)
        now = self.ctx.clock.now_ms()
        plans = data.plans
        keep = table.cursor_row
        table.clear()
        for s in self.states:
            style = "bold red" if is_stale(s, now) else ("dim" if not s.enabled else "")
            table.add_row(
                Text(s.name, style=style),
                Text("on" if s.enabled else "off"),
                Text(plans.get(s.name, "—")),
                Text(relative(s.last_run_at, now) if s.last_run_at else "never"),
                Text(s.last_status or "—", style="red" if s.last_status in ("error", "timeout") else ""),
                next_due_cell(s, now, style),
                Text(f"{s.created_last}/{s.ignored_last}"),
                Text(str(s.consecutive_failures), style="red" if s.consecutive_failures else ""),
                skipped_cell(s),
                Text(one_line(s.last_error or "", 50), style="red"),
                key=s.name,
            )
        if self.states:
            table.move_cursor(row=min(keep, len(self.states) - 1), animate=False)
        note = "" if self.states else "no sensors: add [[sensors]] entries to vigil.toml (see docs/sensors.md)"
        self.query_one("#error", Static).update(Text(note, style="dim"))

    @property
    def current(self) -> SensorState | None:
        row = self.query_one(DataTable).cursor_row
        return self.states[row] if 0 <= row < len(self.states) else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("run_now", "toggle_enabled"):
            if self.ctx.readonly:
                return False
            return True if self.current is not None else None
        return True

    def action_toggle_enabled(self) -> None:
        if self.current is not None:
            self.run_worker(self._toggle(self.current), group="write", exit_on_error=False)

    @guarded("enabling or disabling the sensor")
    async def _toggle(self, state: SensorState) -> None:
        await self.ctx.store.set_sensor_enabled(state.name, not state.enabled)
        self.notify(f"sensor {state.name} {'disabled' if state.enabled else 'enabled'}", markup=False)
        self.reload()

    def action_run_now(self) -> None:
        if self.current is not None:
            self.run_worker(self._run_now(self.current.name), group=f"run-{self.current.name}", exit_on_error=False)

    @guarded("running the sensor")
    async def _run_now(self, name: str) -> None:
        self.notify(f"running sensor {name}…", markup=False)
        home = str(self.ctx.settings.home)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "vigil",
            "--home",
            home,
            "sensors",
            "run",
            name,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), RUN_NOW_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            self.notify(f"sensor {name}: still running after {RUN_NOW_TIMEOUT_S}s, stopped", severity="error")
            return
        text = one_line(out.decode("utf-8", errors="replace"), 300) or "done"
        if proc.returncode == 0:
            self.notify(f"sensor {name}: {text}", markup=False)
        else:
            self.notify(f"sensor {name} failed: {text}", severity="error", markup=False)
        self.reload()
