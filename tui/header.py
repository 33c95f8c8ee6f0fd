"""The queue screen's header: what the loop does, the count of each state, the last
24 hours, and the agent CLIs' accounts when there are several or one is limited.

Data comes down as a ``QueueSnapshot``; ``tick`` re-renders the relative times
every second without a query. The loop's line is the one truth of
``vigil.liveness`` (the same words ``vigil status`` and ``vigil doctor`` use),
with what only a screen shows: the running task and for how long, the next due
time. The counts are links: clicking one (or its key, shown underlined) shows
only that state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from tui.cells import money, spark, tokens
from tui.loaders import QueueSnapshot
from tui.loop_process import EXITED
from tui.times import relative, span
from vigil.accounts import AccountState
from vigil.durations import format_duration
from vigil.gate import BACKOFF, GateState
from vigil.limit_kinds import label
from vigil.liveness import LoopCondition, LoopHealth
from vigil.models import Task
from vigil.states import TASK_STATES

MAX_RUNNING_SHOWN = 3  # lanes: the header names this many running tasks, then counts


def loop_text(
    health: LoopHealth, next_due_at: int | None, now_ms: int, *, active: Sequence[Task] = (), gate: bool = True
) -> Text:
    """One line saying what the loop is doing. Which task runs comes from ``active``
    (the tasks table, read at every change), never from the heartbeat, which is
    written only every heartbeat and so names a finished task for up to that long.
    ``gate`` False leaves out a closed gate (the header gives it a line of its own)."""
    line = process_text(health, next_due_at, now_ms, active=active)
    if active and not health.dispatching:
        line.append(", still marked active: " + ", ".join(f"#{t.id}" for t in active), style="red")
    if gate:
        line.append_text(gate_text(health, now_ms))
    return line


def labelled(line: Text, label: str) -> Text:
    """The loop's line with how it runs (``loop: background process (pid N)``)
    after it, dim; a background loop that exited is said first, in red, so that a
    narrow terminal's cut never hides it. One line, cut with an ellipsis."""
    if label.startswith(EXITED):
        line = Text.assemble((label, "bold red"), "   ", line)
    elif label:
        line.append(f"   loop: {label}", style="dim")
    line.no_wrap, line.overflow = True, "ellipsis"
    return line


def process_text(health: LoopHealth, next_due_at: int | None, now_ms: int, *, active: Sequence[Task]) -> Text:
    """What the dispatcher process does: runs a task, idles, stands by, stopped …"""
    condition, beat = health.condition, health.heartbeat
    if health.dispatching and active:
        line = running_text(active, now_ms)
        if beat is not None and beat.note:
            # the agent CLI's own retries, while they go on ("API retry 3/10, next in 9 s")
            line.append(f"  {beat.note}", style="yellow")
        return line
    if health.dispatching:
        if next_due_at is None:
            due = "nothing due"
        else:
            due = "next due " + ("now" if next_due_at <= now_ms else relative(next_due_at, now_ms))
        return Text.assemble(("○ idle", "cyan"), f", {due}")
    if condition is LoopCondition.STANDBY:
        return Text("◌ standby: a vigil run waits for a free dispatcher lane", style="yellow")
    if condition is LoopCondition.STOPPED and beat is not None:
        ago = relative(beat.heartbeat_at, now_ms)
        return Text(f"○ stopped cleanly {ago}; vigil run works through the queue", style="dim")
    if condition is LoopCondition.DIED and beat is not None and health.heartbeat_fresh:  # its lock is free
        return Text(f"✗ died: pid {beat.pid} no longer holds the dispatcher lock", style="bold red")
    if condition is LoopCondition.DIED and beat is not None:
        return Text(f"✗ died: no heartbeat for {span(now_ms - beat.heartbeat_at)}", style="bold red")
    return Text("○ not started: vigil run works through the queue", style="dim")


def gate_text(health: LoopHealth, now_ms: int) -> Text:
    """``  ‖ loop paused: reason`` while the gate is closed (empty when open)."""
    gate = health.gate
    if not health.gate_closed:
        return Text()
    if gate.kind == BACKOFF and gate.until is not None:
        # it ends by itself: "backing off after 3 transient failures, next try in 40s"
        wait = format_duration(max(0, gate.until - now_ms))
        return Text(f"  ‖ {gate.reason}, next try in {wait}", style="bold yellow")
    # a gate that lifts by itself at its ``until`` is backing off
    word = "paused" if gate.state is GateState.PAUSED else "gated" if gate.until is None else "backing off"
    line = Text(f"  ‖ loop {word}", style="bold yellow")
    if gate.reason:
        line.append(f": {gate.reason}", style="yellow")
    if gate.until is not None:
        line.append(f" (until {relative(gate.until, now_ms)})", style="yellow")
    return line


def accounts_text(accounts: Sequence[AccountState], now_ms: int) -> Text:
    """``accounts: claude:a free, 5h 62% used · claude:b limited (weekly), resets in
    4h59m``; empty when there is one account, free, with nothing known of its
    windows (nothing to say)."""
    line = Text()
    if len(accounts) < 2 and all(state.state == "free" and not _used(state) for state in accounts):
        return line
    line.append("accounts: ", style="dim")
    for n, state in enumerate(accounts):
        line.append(" · " if n else "")
        used = _used(state)
        if state.state == "needs_person":
            line.append(f"{state.name} needs you: {state.hold}; vigil resume", style="bold red")
        elif state.until is None:
            line.append(f"{state.name} free" + (f", {used}" if used else ""))
        else:
            wait = format_duration(max(0, state.until - now_ms))
            kind = f" ({label(state.kind)})" if state.kind and state.state == "limited" else ""
            what = f"{state.name} {state.state}{kind}, resets in {wait}" + (f", {used}" if used else "")
            line.append(what, style="yellow")
    return line


def _used(state: AccountState) -> str:
    """``5h 62% used`` for each window whose use was reported, comma-separated."""
    return ", ".join(
        f"{label(report.kind)} {round(report.utilization * 100)}% used"
        for report in state.windows
        if report.utilization is not None
    )


def running_text(active: Sequence[Task], now_ms: int) -> Text:
    """``● running #8 for 12m`` (several lanes: each task)."""
    line = Text()
    line.append("● running ", style="bold green")
    for n, task in enumerate(active[:MAX_RUNNING_SHOWN]):
        line.append(", " if n else "")
        line.append(f"#{task.id}", style="bold")
        if task.started_at is not None:
            line.append(f" for {span(max(0, now_ms - task.started_at))}")
    if len(active) > MAX_RUNNING_SHOWN:
        line.append(f" and {len(active) - MAX_RUNNING_SHOWN} more")
    return line


def counts_markup(counts: Mapping[str, int], selected: Sequence[str], width: int = 10_000) -> str:
    """Clickable counts, one per state, in at most ``width`` cells: the labels with
    their key underlined (two spaces apart, then one), else the states with no
    task left out (a selected one stays), else the keys alone (``A 1  P 9,950``).
    Markup is safe here: only state names and numbers."""
    for short, skip_empty, gap in ((False, False, "  "), (False, False, " "), (False, True, " "), (True, True, " ")):
        parts, plain = [], []
        for state in TASK_STATES:
            count = counts.get(state.name, 0)
            if skip_empty and not count and state.name not in selected:
                continue
            label, key = state.label, state.key
            if short:
                shown, text = f"[u]{key}[/u]", key
            elif label[0].upper() == key:
                shown, text = f"[u]{key}[/u]{label[1:]}", label
            elif key.lower() in label:
                at = label.index(key.lower())
                shown, text = f"{label[:at]}[u]{label[at]}[/u]{label[at + 1 :]}", label
            else:
                shown, text = f"{label}([u]{key}[/u])", f"{label}({key})"
            style = "reverse " if state.name in selected else ""
            parts.append(f"[{style}@click=screen.filter_state('{state.name}')]{shown} {count:,}[/]")
            plain.append(f"{text} {count:,}")
        if len(gap.join(plain)) <= width:
            break
    return gap.join(parts)


def use_text(snapshot: QueueSnapshot) -> Text:
    """``today $1.20 · 3.4k tokens   24h 140 runs ▁▂▅█▃`` (the bars: runs per hour)."""
    line = Text("today ")
    line.append(money(snapshot.cost_today_usd), style="bold")
    runs = sum(snapshot.hourly.runs)
    line.append(f" · {tokens(snapshot.tokens_today)} tokens   24h {runs:,} {'run' if runs == 1 else 'runs'} ")
    line.append(spark([float(n) for n in snapshot.hourly.runs]), style="magenta")
    return line


class StatusHeader(Vertical):
    """Three lines: the loop's state (badges at its right end), the counts, the use;
    one more for a closed gate (paused, gated, backing off: its reason whole, never
    under the badges), and one for the accounts when there are several or one is
    limited."""

    DEFAULT_CSS = """
    StatusHeader { height: auto; padding: 0 1; background: $panel; }
    StatusHeader Horizontal { height: 1; }
    StatusHeader #loop { width: 1fr; height: 1; overflow: hidden; }
    StatusHeader #badges { width: auto; height: 1; }
    StatusHeader #gate, StatusHeader #counts, StatusHeader #spend, StatusHeader #accounts {
        height: 1; overflow: hidden;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self.snapshot: QueueSnapshot | None = None
        self.loop_label = ""
        self.badges = Text()
        self.selected: tuple[str, ...] = ()
        self.loop_line = Text()  # what the loop's line shows now
        self._shown: dict[str, str | Text] = {}

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Static(id="loop")
            yield Static(id="badges")
        yield Static(id="gate")
        yield Static(id="counts")
        yield Static(id="spend")
        yield Static(id="accounts")

    def show(self, snapshot: QueueSnapshot, now_ms: int) -> None:
        self.snapshot = snapshot
        width = (self.size.width or self.app.size.width) - 2
        self._update("#counts", counts_markup(snapshot.window.counts, self.selected, width))
        self._update("#spend", use_text(snapshot))
        self.tick(now_ms)

    def on_resize(self) -> None:
        if self.snapshot is not None:
            width = (self.size.width or self.app.size.width) - 2
            self._update("#counts", counts_markup(self.snapshot.window.counts, self.selected, width))

    def set_badges(self, badges: Text) -> None:
        self.badges = badges
        self._update("#badges", badges)

    def tick(self, now_ms: int) -> None:
        gate = Text()
        if self.snapshot is None:
            line = Text("loading…", style="dim")
        else:
            s = self.snapshot
            health = s.health(now_ms)
            line = loop_text(health, s.window.next_due_at, now_ms, active=s.window.active, gate=False)
            gate = gate_text(health, now_ms)
        line = labelled(line, self.loop_label)
        self.loop_line = line
        self._update("#loop", line)
        self._show_line("#gate", gate)
        accounts = accounts_text(self.snapshot.accounts, now_ms) if self.snapshot is not None else Text()
        self._show_line("#accounts", accounts)

    def _show_line(self, selector: str, line: Text) -> None:
        """A line shown only when it says something."""
        shown = self.query_one(selector, Static)
        if shown.display != bool(line.plain):
            shown.display = bool(line.plain)
        self._update(selector, line)

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
