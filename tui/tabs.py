"""The top of every screen: which screen is open, which home, and what the loop is doing.

``TabBar`` is one line of the five screens with the open one highlighted (click
one, or press its number) and the home it watches at the right. ``LoopLine`` is
the queue header's first line for the
other screens: it reads ``ctx.loop``, which the app reloads at every change
(``tui.loop_state``), so every screen says what is running within a second.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from tui.context import Context
from tui.header import labelled, loop_text

SCREENS = (
    ("1", "queue", "Queue"),
    ("2", "task", "Task"),
    ("3", "history", "History"),
    ("4", "sensors", "Sensors"),
    ("5", "costs", "Costs"),
)


class TabBar(Static):
    """``1 Queue  2 Task  3 History  4 Sensors  5 Costs``, the open one reversed, and
    at the right the home it watches (``ctx.home_label``)."""

    DEFAULT_CSS = "TabBar { height: 1; background: $boost; padding: 0 1; }"

    def __init__(self, current: str, home: str = "") -> None:
        super().__init__()
        self.current = current
        self.home = home
        self.line = Text(no_wrap=True, overflow="crop")  # what it shows

    def on_mount(self) -> None:
        self.render_tabs()

    def on_resize(self) -> None:
        self.render_tabs()

    def render_tabs(self) -> None:
        line = Text(no_wrap=True, overflow="crop")
        for n, (key, name, label) in enumerate(SCREENS):
            click = Style(meta={"@click": f"app.simulate_key({key!r})"})
            style = Style.parse("bold reverse" if name == self.current else "dim") + click
            line.append("  " if n else "")
            line.append(f" {key} {label} ", style=style)
        width = self.size.width or self.app.size.width - 2
        room = width - line.cell_len - 2
        if self.home and room >= 8:
            home = self.home if len(self.home) <= room else "…" + self.home[-(room - 1) :]
            line.append(" " * (width - line.cell_len - len(home)))
            line.append(home, style="bold")
        self.line = line
        self.update(line)


class LoopLine(Static):
    """The loop's state in one line, re-rendered every second (relative times)."""

    DEFAULT_CSS = "LoopLine { height: 1; padding: 0 1; background: $panel; }"

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx

    def on_mount(self) -> None:
        self.show_state()
        self.set_interval(1.0, self.show_state)

    def show_state(self) -> None:
        state = self.ctx.loop
        now = self.ctx.clock.now_ms()
        if state is None:
            line = Text("loading…", style="dim")
        else:
            line = loop_text(state.health(now), state.next_due_at, now, active=state.active)
        self.update(labelled(line, self.ctx.loop_label))
