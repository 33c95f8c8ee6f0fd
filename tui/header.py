"""The queue screen's header: dispatcher state, status counts, today's spend, and
the agent CLIs' accounts when there are several or one is limited.

Data comes down as a ``QueueSnapshot``; ``tick`` re-renders the relative times
every second without a query. The counts are links: clicking one (or its key,
shown underlined) filters the table by that status.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from tui.cells import money, relative, spark, tokens
from tui.loaders import QueueSnapshot
from vigil.accounts import AccountState
from vigil.durations import format_duration
from vigil.gate import BACKOFF, LoopGate
from vigil.models import DispatcherHeartbeat, Task, TaskStatus

MAX_RUNNING_SHOWN = 3  # lanes: the header names this many running tasks, then counts
STALE_AFTER_MS = 60_000  # at least this old (and three heartbeats) means no dispatcher is alive
STATUS_KEYS = {
    TaskStatus.ACTIVE: "A",
    TaskStatus.PENDING: "P",
    TaskStatus.BLOCKED: "B",
    TaskStatus.WAITING: "W",
    TaskStatus.COMPLETED: "C",
    TaskStatus.FAILED: "F",
    TaskStatus.CANCELED: "X",
}


def dispatcher_text(
    heartbeat: DispatcherHeartbeat | None,
    gate: LoopGate | None,
    next_due_at: int | None,
    now_ms: int,
    stale_after_ms: int = STALE_AFTER_MS,
    *,
    active: Sequence[Task] = (),
) -> Text:
    """One line saying what the loop is doing. Whether a dispatcher is alive is
    judged by its heartbeat's age; which task runs comes from ``active`` (the tasks
    table, read at every change), never from the heartbeat, which is written only
    every heartbeat and so names a finished task for up to that long."""
    line = Text()
    alive = heartbeat is not None and heartbeat.state != "stopped" and now_ms - heartbeat.heartbeat_at <= stale_after_ms
    if heartbeat is None:
        line.append("no dispatcher seen", style="bold red")
    elif not alive:
        minutes = max(0, now_ms - heartbeat.heartbeat_at) // 60_000
        line.append(f"no dispatcher seen for {minutes} min", style="bold red")
    if active:
        line.append_text(running_text(active, now_ms, alive=alive))
        if alive and heartbeat is not None and heartbeat.note:
            # the agent CLI's own retries, while they go on ("API retry 3/10, next in 9 s")
            line.append(f"  {heartbeat.note}", style="yellow")
    elif alive:
        line.append("○ idle", style="cyan")
        if next_due_at is not None:
            due = "now" if next_due_at <= now_ms else relative(next_due_at, now_ms)
            line.append(f", next due {due}")
        else:
            line.append(", nothing due")
    if gate is not None and not gate.is_open(now_ms) and gate.kind == BACKOFF and gate.until is not None:
        # it ends by itself: "backing off after 3 transient failures, next try in 40s"
        wait = format_duration(max(0, gate.until - now_ms))
        line.append(f"  ‖ {gate.reason}, next try in {wait}", style="bold yellow")
    elif gate is not None and not gate.is_open(now_ms):  # paused, or gated and not yet lifted
        line.append(f"  ‖ loop {gate.state}", style="bold yellow")
        if gate.reason:
            line.append(f": {gate.reason}", style="yellow")
        if gate.until is not None:
            line.append(f" (until {relative(gate.until, now_ms)})", style="yellow")
    return line


def accounts_text(accounts: Sequence[AccountState], now_ms: int) -> Text:
    """``accounts: claude:a free · claude:b limited, resets in 4h59m``; empty when
    there is one account and it is free (nothing to say)."""
    line = Text()
    if len(accounts) < 2 and all(state.until is None for state in accounts):
        return line
    line.append("accounts: ", style="dim")
    for n, state in enumerate(accounts):
        line.append(" · " if n else "")
        if state.until is None:
            line.append(f"{state.name} free")
        else:
            wait = format_duration(max(0, state.until - now_ms))
            line.append(f"{state.name} limited, resets in {wait}", style="yellow")
    return line


def running_text(active: Sequence[Task], now_ms: int, *, alive: bool) -> Text:
    """``● running #8 for 12s`` (several lanes: each task), or, with no live
    dispatcher, which tasks are still marked active."""
    line = Text()
    if not alive:
        line.append(", still marked active: ", style="red")
        line.append(", ".join(f"#{t.id}" for t in active), style="red")
        return line
    line.append("● running ", style="bold green")
    for n, task in enumerate(active[:MAX_RUNNING_SHOWN]):
        line.append(", " if n else "")
        line.append(f"#{task.id}", style="bold")
        if task.started_at is not None:
            line.append(f" for {format_duration(max(0, now_ms - task.started_at))}")
    if len(active) > MAX_RUNNING_SHOWN:
        line.append(f" and {len(active) - MAX_RUNNING_SHOWN} more")
    return line


def counts_markup(counts: dict[TaskStatus, int], selected: frozenset[TaskStatus]) -> str:
    """Clickable counts. Markup is safe here: only status names and numbers."""
    parts = []
    for status, key in STATUS_KEYS.items():
        name = str(status)
        label = f"[u]{key}[/u]{name[1:]}" if name[0].upper() == key else f"{name}([u]{key}[/u])"
        style = "reverse " if status in selected else ""
        parts.append(f"[{style}@click=screen.filter_status('{name}')]{label} {counts.get(status, 0)}[/]")
    return "  ".join(parts)


class StatusHeader(Vertical):
    """Three lines: loop state (+ badges), counts, spend; a fourth, the accounts,
    when there are several or one is limited."""

    DEFAULT_CSS = """
    StatusHeader { height: auto; padding: 0 1; background: $panel; }
    StatusHeader Horizontal { height: 1; }
    StatusHeader #loop { width: 1fr; }
    StatusHeader #badges { width: auto; }
    StatusHeader #counts, StatusHeader #spend, StatusHeader #accounts { height: 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.snapshot: QueueSnapshot | None = None
        self.loop_label = ""
        self.stale_after_ms = STALE_AFTER_MS
        self.badges = Text()
        self.selected: frozenset[TaskStatus] = frozenset()
        self._shown: dict[str, str | Text] = {}

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Static(id="loop")
            yield Static(id="badges")
        yield Static(id="counts")
        yield Static(id="spend")
        yield Static(id="accounts")

    def show(self, snapshot: QueueSnapshot, now_ms: int) -> None:
        self.snapshot = snapshot
        self._update("#counts", counts_markup(snapshot.counts, self.selected))
        spend = Text("today ")
        spend.append(money(snapshot.cost_today_usd), style="bold")
        spend.append(f" · {tokens(snapshot.tokens_today)} tokens   24h ")
        spend.append(spark(snapshot.hourly_cost), style="magenta")
        self._update("#spend", spend)
        self.tick(now_ms)

    def set_badges(self, badges: Text) -> None:
        self.badges = badges
        self._update("#badges", badges)

    def tick(self, now_ms: int) -> None:
        if self.snapshot is None:
            line = Text("loading…", style="dim")
        else:
            s = self.snapshot
            line = dispatcher_text(s.heartbeat, s.gate, s.next_due_at, now_ms, self.stale_after_ms, active=s.active)
        if self.loop_label:
            line.append(f"   loop: {self.loop_label}", style="dim")
        self._update("#loop", line)
        accounts = accounts_text(self.snapshot.accounts, now_ms) if self.snapshot is not None else Text()
        shown = self.query_one("#accounts", Static)
        if shown.display != bool(accounts.plain):
            shown.display = bool(accounts.plain)
        self._update("#accounts", accounts)

    def _update(self, selector: str, content: str | Text) -> None:
        """Repaint only on change: an unchanged header must not cost a layout pass
        every second (idle CPU)."""
        old = self._shown.get(selector)
        if isinstance(old, Text) and isinstance(content, Text):
            if old.plain == content.plain and old.spans == content.spans and old.style == content.style:
                return
        elif old == content:
            return
        self._shown[selector] = content
        self.query_one(selector, Static).update(content)
