"""The costs screen (key 5): spend and tokens per day, skill, source and model.

``[`` and ``]`` change the window (1, 7, 30 or 90 days). The per-day chart is a
bar per day scaled to the most expensive day. The first line is the budget: the
rolling-24 h spend against ``[budget] daily_usd`` (``vigil.budget``), or one dim
line saying no cap is set.
"""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from tui.cells import money, one_line, tokens
from tui.context import Context
from tui.keybar import KeyBar
from tui.live import Banner, LiveScreen
from tui.loaders import CostSnapshot, load_costs
from tui.tabs import LoopLine, TabBar
from vigil.budget import BudgetUse, budget_line
from vigil.models import CostRow

WINDOWS = (1, 7, 30, 90)
BAR_CELLS = 30
BUDGET_CELLS = 20  # the budget bar: short enough for the line to fit 80 columns


def cost_table(title: str, rows: tuple[CostRow, ...]) -> Table:
    table = Table(title=title, title_justify="left", box=None, expand=False)
    for name in (title.rsplit(maxsplit=1)[-1], "cost", "runs", "tokens in", "tokens out"):
        table.add_column(name, justify="left" if name == title.rsplit(maxsplit=1)[-1] else "right")
    for row in rows[:15]:
        table.add_row(
            Text(one_line(row.key, 24)),
            money(row.cost_usd),
            str(row.runs),
            tokens(row.tokens_in),
            tokens(row.tokens_out),
        )
    if not rows:
        table.add_row(Text("no finished runs", style="dim"), "", "", "", "")
    return table


def budget_text(use: BudgetUse, urgent_priority: int) -> Text:
    """The budget line: spend against the cap with a bar, and who may run. Without
    a cap, one quiet line."""
    if use.cap_usd is None:
        return Text(budget_line(use) + " · [budget] daily_usd is not set", style="dim")
    fraction = use.fraction or 0.0
    style = "red" if use.over else "yellow" if fraction >= 0.8 else "green"
    cells = min(BUDGET_CELLS, round(fraction * BUDGET_CELLS))
    line = Text(f"budget: {money(use.spent_usd)} of {money(use.cap_usd)} in the last 24 h ", style="bold")
    line.append("█" * cells, style=style)
    line.append("░" * (BUDGET_CELLS - cells), style="dim")
    line.append(f" {fraction:.0%}", style=style)
    if use.over:
        line.append(f"  over the cap: only urgent tasks run (priority ≤ {urgent_priority})", style="bold red")
    else:
        line.append("  under the cap: every task runs", style="dim")
    return line


def day_chart(rows: tuple[CostRow, ...]) -> Text:
    """One line per day, oldest first: date, bar, cost, tokens."""
    chart = Text()
    top = max((r.cost_usd for r in rows), default=0.0)
    for row in sorted(rows, key=lambda r: r.key):
        cells = 0 if top <= 0 else max(1 if row.cost_usd > 0 else 0, round(row.cost_usd / top * BAR_CELLS))
        chart.append(f"{row.key} ")
        chart.append("█" * cells, style="magenta")
        chart.append(
            " " * (BAR_CELLS - cells) + f" {money(row.cost_usd):>9} {tokens(row.tokens_in + row.tokens_out):>7}\n"
        )
    return chart or Text("no finished runs in this window", style="dim")


class CostsScreen(LiveScreen[CostSnapshot]):
    TITLE = "Costs"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "window(-1)", "Shorter", key_display="[", tooltip="a shorter window"),
        Binding("right_square_bracket", "window(1)", "Longer", key_display="]", tooltip="a longer window"),
    ]

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx, name="costs")
        self.days = 7
        self.costs: CostSnapshot | None = None  # what is shown (None: not loaded yet)

    def compose(self) -> ComposeResult:
        yield Banner()
        yield TabBar("costs", self.ctx.home_label)
        yield LoopLine(self.ctx)
        with VerticalScroll():
            yield Static(id="budget")
            yield Static(id="summary")
            yield Static(id="chart")
            yield Static(id="skill")
            yield Static(id="source")
            yield Static(id="model")
        yield KeyBar(self.ctx)

    async def load(self) -> CostSnapshot:
        ctx = self.ctx
        return await load_costs(ctx.store, ctx.clock.now_ms(), self.days, ctx.settings.budget, ctx.times)

    def apply(self, data: CostSnapshot) -> None:
        costs: CostSnapshot = data
        self.costs = costs
        total = sum(r.cost_usd for r in costs.by_day)
        used = sum(r.tokens_in + r.tokens_out for r in costs.by_day)
        runs = sum(r.runs for r in costs.by_day)
        summary = Text(f"last {self.days} day{'s' if self.days > 1 else ''}: ", style="bold")
        summary.append(f"{money(total)} · {tokens(used)} tokens · {runs} run{'' if runs == 1 else 's'}")
        summary.append("   ([ and ] change the window)")
        self.query_one("#budget", Static).update(budget_text(costs.budget, self.ctx.settings.budget.urgent_priority))
        self.query_one("#summary", Static).update(summary)
        self.query_one("#chart", Static).update(day_chart(costs.by_day))
        self.query_one("#skill", Static).update(cost_table("by skill", costs.by_skill))
        self.query_one("#source", Static).update(cost_table("by source", costs.by_source))
        self.query_one("#model", Static).update(cost_table("by model", costs.by_model))

    def action_window(self, step: int) -> None:
        index = max(0, min(len(WINDOWS) - 1, WINDOWS.index(self.days) + step))
        self.days = WINDOWS[index]
        self.reload()
