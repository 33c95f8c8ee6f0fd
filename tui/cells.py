"""Task fields → ``rich.text.Text`` cells. User text is never parsed as markup.

Subjects are cut to ``SUBJECT_CELLS`` characters with newlines flattened, so a
10,000-character subject costs one short cell (the column then cuts it to its
width with an ellipsis); the detail pane shows all of it.
"""

from __future__ import annotations

from rich.text import Text

from tui.columns import Column
from tui.times import MINUTE_MS, relative, span
from vigil.models import FINISHED_STATUSES, Task, TaskStatus
from vigil.states import state_of

SUBJECT_CELLS = 120

# Most telling first; the subject (width 0) takes what is left, and the optional
# columns at the end show only when there is room (tui.columns).
COLUMNS = (
    Column("mark", " ", 1),
    Column("next", " ", 1),
    Column("id", "id", 2),  # widened to the longest id in the table
    Column("pri", "pri", 3),
    Column("status", "status", 9),
    Column("when", "due/age", 13),
    Column("subject", "subject", 0),
    Column("source", "source", 12),
    Column("tries", "tries", 5, optional=True),
    Column("cost", "cost", 7, optional=True),
    Column("skills", "skills", 14, optional=True),
)
SUBJECT_MIN = 16
SUBJECT_KEEP = 32  # optional columns show only while the subject keeps this much
SUBJECT_MAX = 80


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def cut(text: str, style: str = "") -> Text:
    """A one-line cell that a narrow column ends with an ellipsis."""
    return Text(one_line(text, SUBJECT_CELLS), style=style, overflow="ellipsis", no_wrap=True)


def is_later(task: Task, now_ms: int) -> bool:
    """Pending but not yet due (scheduled for later)."""
    return task.status is TaskStatus.PENDING and task.scheduled_for > now_ms


def when_cell(task: Task, now_ms: int) -> Text:
    """Due time for waiting tasks, run time for the active one, age otherwise."""
    if task.status is TaskStatus.ACTIVE and task.started_at is not None:
        return Text(f"running {span(now_ms - task.started_at)}", style="green")
    if is_later(task, now_ms):
        return Text(f"due {relative(task.scheduled_for, now_ms)}", style="cyan")
    # Ages count whole minutes from the start of the current minute, so every age
    # cell changes at the same moment: one repaint a minute instead of one per row
    # (a repaint per changed cell was most of the TUI's idle CPU).
    minute = now_ms - now_ms % MINUTE_MS
    if task.completed_at is not None:
        return Text(f"{span(minute - task.completed_at)} ago", style="dim")
    return Text(f"age {span(minute - task.created_at)}")


def task_cells(task: Task, now_ms: int, *, is_next: bool, marked: bool) -> dict[str, Text]:
    """Every column's cell for one task, keyed like ``COLUMNS``."""
    later = is_later(task, now_ms)
    state = state_of(task)
    dim = (
        "dim"
        if later or task.status in FINISHED_STATUSES or (task.status is TaskStatus.BLOCKED and not state.narrows)
        else ""
    )
    # Glyphs that common terminal fonts (DejaVu Sans Mono) have: the clock and the
    # hourglass used before showed as boxes there.
    if is_next:
        marker = Text("▶", style="bold green")
    elif state.marker.strip():  # a state a person must act on (awaiting approval)
        marker = Text(state.marker, style=state.style)
    elif later:
        marker = Text("◷", style="cyan")
    elif task.waiting_on:
        marker = Text("◌", style="yellow")
    else:
        marker = Text(" ")
    status = state.cell + (" ✗" if task.cancel_requested else "")  # ✗: asked to cancel
    return {
        "mark": Text("●" if marked else " ", style="bold magenta"),
        "next": marker,
        "id": Text(str(task.id), style="bold" if is_next else dim, justify="right"),
        "pri": Text(str(task.priority), style="bold red" if task.priority <= 2 else dim, justify="right"),
        "status": Text(status, style=state.style),
        "subject": cut(task.subject, dim),
        "source": cut(task.source, "dim"),
        "skills": cut(",".join(task.skills), "dim"),
        "tries": Text(f"{task.attempt_count}/{task.max_retries + 1}", justify="right"),
        "when": when_cell(task, now_ms),
        "cost": Text(f"${task.cost_usd:.2f}" if task.cost_usd else "", justify="right"),
    }


def money(usd: float) -> str:
    return f"${usd:,.2f}"


def tokens(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}M"
    if count >= 1_000:
        return f"{count / 1_000:.1f}k"
    return str(count)


BARS = " ▁▂▃▄▅▆▇█"


def spark(values: tuple[float, ...] | list[float]) -> str:
    """A one-line bar chart: each value scaled to the largest (all zero: flat)."""
    top = max(values, default=0.0)
    if top <= 0:
        return BARS[1] * len(values)
    return "".join(BARS[max(1, round(v / top * (len(BARS) - 1)))] if v > 0 else BARS[1] for v in values)
