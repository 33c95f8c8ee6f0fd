"""The keys of the screen in front, once each and grouped: one list for the footer,
the help (``?``) and the command palette (``ctrl+p``), so the three never disagree.

A key comes from the screen's own bindings, the app's, or the focused widget's
(the table's cursor keys). Its ``enabled`` is the screen's ``check_action``: False
hides it (a read-only TUI never writes), None shows it dimmed (it does not apply
to the highlighted task). Two keys for one action (``+`` and ``=``) are one entry.
Groups come in the order of ``GROUPS``: Vigil's own keys first, then the widgets'.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen

GROUPS = ("Task", "View", "Screens", "Loop", "App", "Table and text")
VIEW_ACTIONS = frozenset(
    {
        "back",
        "clear",
        "diff",
        "filter",
        "filter_status",
        "follow",
        "freeze",
        "jump",
        "more",
        "search",
        "sort",
        "toggle_detail",
        "toggle_utc",
        "window",
    }
)
APP_GROUPS = {"show": "Screens", "show_task": "Screens", "loop_gate": "Loop", "toggle_utc": "View"}

# The task keys, bound alike on every screen that shows tasks, so a key reads the
# same in each screen's footer, help and palette.
RAISE = Binding("plus,equals_sign", "raise", "Raise", key_display="+", tooltip="more urgent (a lower number)")
LOWER = Binding("minus", "lower", "Lower", key_display="-", tooltip="less urgent (a higher number)")
DEFER = Binding("d", "defer", "Defer", tooltip="later than it is due: 1 hour … 1 week, or until a time")
CANCEL = Binding("x", "cancel", "Cancel", tooltip="cancel, after a confirmation (a running task is asked to stop)")
RETRY = Binding("r", "retry", "Retry", tooltip="run a failed or canceled task again")
APPROVE = Binding("a", "approve", "Approve", tooltip="approve a task that waits for approval")
REJECT = Binding("R", "reject", "Reject", show=False, tooltip="reject a task that waits for approval, with a reason")
DIFF = Binding("D", "diff", "Diff", tooltip="the task's branch against its base: review, approve and merge")
ANSWER = Binding("w", "answer", "Answer", tooltip="answer the question of a task waiting for an answer")
UNBLOCK = Binding("u", "unblock", "Unblock", tooltip="put a blocked task back in the queue, with an optional note")


@dataclass(frozen=True)
class KeyInfo:
    """One action and the key that runs it.

    ``key`` is the binding's key name (for ``simulate_key``); ``shown`` is how it is
    displayed (``+``, ``q/^q/^c``: every key that runs it), ``first`` the one the
    footer shows (the key whose binding asks for the footer). ``label`` is the footer's short word, ``help`` the
    longer text of the help and the palette. ``enabled`` False: it does nothing for
    the highlighted row now (shown dimmed). ``in_footer``: the binding asks for a
    place in the footer."""

    key: str
    shown: str
    action: str
    label: str
    help: str
    group: str
    enabled: bool
    in_footer: bool
    node: DOMNode
    first: str = ""

    @property
    def name(self) -> str:
        """The action's method name, without namespace or arguments."""
        return self.action.split("(", 1)[0].rsplit(".", 1)[-1]


def group_of(node: DOMNode, screen: Screen[object], binding: Binding) -> str:
    name = binding.action.split("(", 1)[0]
    if node is screen and "." not in name:
        return "View" if name in VIEW_ACTIONS else "Task"
    if node is screen.app and "." not in name:
        return APP_GROUPS.get(name, "App")
    return "View" if name in VIEW_ACTIONS else "Table and text"  # a widget's: g/G jump


def screen_keys(screen: Screen[object]) -> list[KeyInfo]:
    """Every described key of ``screen`` (with its focused widget and the app): the
    focused widget's first, then the screen's, then the app's, each in the order its
    bindings are declared (``grouped`` sorts them for the help)."""
    app = screen.app
    seen: dict[tuple[int, str], int] = {}  # (node, action) → index in keys
    keys: list[KeyInfo] = []
    for active in screen.active_bindings.values():
        binding = active.binding
        if not binding.description:
            continue
        shown = app.get_key_display(binding)
        if (id(active.node), binding.action) in seen:  # another key for the same action
            n = seen[(id(active.node), binding.action)]
            if shown not in keys[n].shown.split("/"):  # "+" and "=" both show as "+"
                keys[n] = replace(keys[n], shown=f"{keys[n].shown}/{shown}")
            if binding.show and not keys[n].in_footer:  # the key the footer shows (q, not ^c), named first
                others = "/".join(k for k in keys[n].shown.split("/") if k != shown)
                keys[n] = replace(keys[n], shown=f"{shown}/{others}", first=shown, key=binding.key, in_footer=True)
            continue
        seen[(id(active.node), binding.action)] = len(keys)
        keys.append(
            KeyInfo(
                key=binding.key,
                shown=shown,
                action=binding.action,
                label=binding.description,
                help=binding.tooltip or binding.description,
                group=group_of(active.node, screen, binding),
                enabled=active.enabled,
                in_footer=binding.show,
                node=active.node,
                first=shown,
            )
        )
    return keys


def grouped(keys: list[KeyInfo]) -> list[KeyInfo]:
    """``keys`` in the order of ``GROUPS`` (Vigil's first), declared order inside each."""
    return sorted(keys, key=lambda k: GROUPS.index(k.group))
