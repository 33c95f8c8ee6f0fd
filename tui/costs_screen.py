"""The costs screen (key 5): spend and tokens per day, skill, source and model.

``[`` and ``]`` change the window (1, 7, 30 or 90 days). The per-day chart is a
bar per day scaled to the most expensive day.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from tui.cells import money, one_line, tokens
from tui.context import Context
from tui.live import Banner, LiveScreen
from tui.snapshot import CostSnapshot, load_costs
from vigil.models import CostRow

WINDOWS = (1, 7, 30, 90)
BAR_CELLS = 30


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


class CostsScreen(LiveScreen):
    TITLE = "Costs"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "window(-1)", "Shorter", key_display="["),
        Binding("right_square_bracket", "window(1)", "Longer", key_display="]"),
    ]

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx, name="costs")
        self.days = 7

    def compose(self) -> ComposeResult:
        yield Banner()
        with VerticalScroll():
            yield Static(id="summary")
            yield Static(id="chart")
            yield Static(id="skill")
            yield Static(id="source")
            yield Static(id="model")
        yield Footer()

    async def load(self) -> CostSnapshot:
        return await load_costs(self.ctx.store, self.ctx.clock.now_ms(), self.days)

    def apply(self, data: Any) -> None:
        costs: CostSnapshot = data
        total = sum(r.cost_usd for r in costs.by_day)
        used = sum(r.tokens_in + r.tokens_out for r in costs.by_day)
        runs = sum(r.runs for r in costs.by_day)
        summary = Text(f"last {self.days} day{'s' if self.days > 1 else ''}: ", style="bold")
        summary.append(f"{money(total)} · {tokens(used)} tokens · {runs} runs   ([ and ] change the window)")
        self.query_one("#summary", Static).update(summary)
        self.query_one("#chart", Static).update(day_chart(costs.by_day))
        self.query_one("#skill", Static).update(cost_table("by skill", costs.by_skill))
        self.query_one("#source", Static).update(cost_table("by source", costs.by_source))
        self.query_one("#model", Static).update(cost_table("by model", costs.by_model))

    def action_window(self, step: int) -> None:
        index = max(0, min(len(WINDOWS) - 1, WINDOWS.index(self.days) + step))
        self.days = WINDOWS[index]
        self.reload()
