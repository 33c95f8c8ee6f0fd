"""The footer: one line of the screen's keys that always ends with Help and Quit.

Textual's own footer cuts keys off the right edge, Help and Quit first. This one
fits the line to the width instead: full labels if they fit, then labels cut to 6,
5 and 4 characters, then the least important keys dropped: the screen's last
declared first, the app's (``L``, the loop) after them; Help and Quit never.
A key that does not apply to the highlighted row is dimmed. Clicking a key
presses it.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Static

from tui.context import Context
from tui.keys import KeyInfo, screen_keys

PINNED = ("help", "quit_app")  # always shown, at the right end
LABEL_LIMITS = (None, 6, 5, 4)  # None: the full label
KEY_STYLE = "bold #ffa62b"
SHORT_KEYS = {"space": "spc"}


def now_labels(ctx: Context) -> dict[str, str]:
    """Labels that say what a key will do now: ``L`` pauses or resumes the loop."""
    return {"loop_gate": "Resume loop" if ctx.loop_paused else "Pause loop"}


def fit(keys: Sequence[KeyInfo], width: int, labels: dict[str, str] | None = None) -> Text:
    """The footer line for ``keys`` in at most ``width`` cells (Help and Quit kept).

    ``labels`` overrides a label by action name (the loop key says what it will do)."""
    labels = labels or {}
    pinned = [k for k in keys if k.name in PINNED]
    others = [k for k in keys if k.in_footer and k.name not in PINNED]
    app_keys = [k for k in others if k.group in ("Screens", "Loop", "App")]
    # Dropped from the front of this list: the screen's keys from the last declared.
    drop_order = [k for k in reversed(others) if k not in app_keys] + list(reversed(app_keys))
    while True:
        for limit in LABEL_LIMITS:
            for gap in (2, 1):
                line = _render([*others, *pinned], limit, gap, labels)
                if line.cell_len <= width:
                    return line
        if not drop_order:
            return line  # Help and Quit alone: shown even when they do not fit
        others.remove(drop_order.pop(0))


def _render(keys: Sequence[KeyInfo], limit: int | None, gap: int, labels: dict[str, str]) -> Text:
    line = Text(no_wrap=True, overflow="crop")
    for n, key in enumerate(keys):
        if n:
            line.append(" " * gap)
        label = labels.get(key.name, key.label)
        if limit is not None:
            label = label[:limit]
        click = Style(meta={"@click": f"app.simulate_key({key.key!r})"})
        dim = "" if key.enabled else "dim "
        line.append(SHORT_KEYS.get(key.shown, key.shown), style=Style.parse(dim + KEY_STYLE) + click)
        line.append(" " + label, style=Style.parse(dim.strip() or "none") + click)
    return line


class KeyBar(Static):
    """Docked at the bottom of a screen; re-rendered when its bindings change
    (focus moved, a key started or stopped applying) and on resize."""

    DEFAULT_CSS = "KeyBar { dock: bottom; height: 1; background: $panel; padding: 0 1; }"

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.call_after_refresh(self.render_keys)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            self.render_keys()

    def on_resize(self, event: Resize) -> None:
        self.render_keys()

    def render_keys(self) -> None:
        width = self.size.width or self.app.size.width - 2
        self.update(fit(screen_keys(self.screen), width, now_labels(self.ctx)))
