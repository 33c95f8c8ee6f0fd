"""The footer: one line of the screen's keys that always ends with Help and Quit.

Textual's own footer cuts keys off the right edge, Help and Quit first. This one
fits the line to the width instead, and never cuts a word: when every key does not
fit, the keys that do not apply now leave first, then the least used ones
(``FOOTER_RANK``: the last listed go first, then keys it does not list, the app's
``L`` among the last), and stay in ``?`` and the palette; Help and Quit never leave
(while a text box has focus, ``?`` and ``q`` type into it: the footer then shows
``F1 Help`` and ``^q Quit``). A key with several keys shows
the first (``q``, not ``q/^q/^c``). A key that does not apply to the highlighted
row is dimmed. Clicking a key presses it.
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
KEY_STYLE = "bold #ffa62b"
SHORT_KEYS = {"space": "spc"}
# The keys people use most, most used first: at 80 columns the queue's footer keeps
# New, Filter, Defer, Cancel, Approve and Raise, in whole words.
FOOTER_RANK = (
    "new_task", "filter", "search", "back", "defer", "cancel", "approve", "diff", "raise", "lower", "retry",
    "run_now", "toggle_enabled", "more", "window", "mark", "freeze", "loop_gate",
)  # fmt: skip


def now_labels(ctx: Context) -> dict[str, str]:
    """Labels that say what a key will do now: ``L`` pauses or resumes the loop."""
    return {"loop_gate": "Resume loop" if ctx.loop_paused else "Pause loop"}


# Of several keys for one action, the one the footer shows, when it is one of them
# (the task screen's q goes back, so its Quit shows ^q).
PREFERRED_KEYS = {"quit_app": ("q", "^q"), "help": ("?", "F1")}


def _shown(key: KeyInfo) -> str:
    keys = key.shown.split("/") if key.shown != "/" else ["/"]
    return next((k for k in PREFERRED_KEYS.get(key.name, ()) if k in keys), key.first or key.shown)


def _rank(key: KeyInfo) -> int:
    return FOOTER_RANK.index(key.name) if key.name in FOOTER_RANK else len(FOOTER_RANK) - 1


def fit(keys: Sequence[KeyInfo], width: int, labels: dict[str, str] | None = None) -> Text:
    """The footer line for ``keys`` in at most ``width`` cells (Help and Quit kept),
    in their declared order, whole words only.

    ``labels`` overrides a label by action name (the loop key says what it will do)."""
    labels = labels or {}
    pinned = [k for k in keys if k.name in PINNED]
    others = [k for k in keys if k.in_footer and k.name not in PINNED]
    # keys that do not apply to the highlighted row leave first (a waiting task's
    # footer keeps w Answer before a Approve), then by rank; stable: the later
    # declared first among equals
    drop_order = sorted(others, key=lambda k: (k.enabled, -_rank(k)))
    while True:
        line = _render([*others, *pinned], labels)
        if line.cell_len <= width or not drop_order:
            return line  # Help and Quit alone: shown even when they do not fit
        others.remove(drop_order.pop(0))


def _render(keys: Sequence[KeyInfo], labels: dict[str, str]) -> Text:
    line = Text(no_wrap=True, overflow="crop")
    for n, key in enumerate(keys):
        if n:
            line.append("  ")
        label = labels.get(key.name, key.label)
        shown = _shown(key)
        click = Style(meta={"@click": f"app.simulate_key({key.key!r})"})
        dim = "" if key.enabled else "dim "
        line.append(SHORT_KEYS.get(shown, shown), style=Style.parse(dim + KEY_STYLE) + click)
        line.append(" " + label, style=Style.parse(dim.strip() or "none") + click)
    return line


class KeyBar(Static):
    """Docked at the bottom of a screen; re-rendered when its bindings change
    (focus moved, a key started or stopped applying) and on resize."""

    DEFAULT_CSS = "KeyBar { dock: bottom; height: 1; background: $panel; padding: 0 1; }"

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        self._shown: object = None  # what the line was fitted from last

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
        """Fit and show the keys, unless nothing the line shows changed (the
        bindings are re-checked at every cursor move: most moves change nothing)."""
        width = self.size.width or self.app.size.width - 2
        keys = screen_keys(self.screen)
        labels = now_labels(self.ctx)
        shown = (width, tuple((k.name, k.first, k.shown, k.enabled, k.in_footer) for k in keys), tuple(labels.items()))
        if shown == self._shown:
            return
        self._shown = shown
        self.update(fit(keys, width, labels))
