"""What one run has used so far, as its stream says it, priced; and what it may spend.

An executor records usage as the agent CLI reports it while the run goes on
(``record``): Claude Code's per-message usage (each ``assistant`` line carries the
usage of its message as that message began: its input and cache tokens, not yet
its whole output), Codex's usage after each response (its session file,
``codex_usage``; its stream only says it at the end of its one turn). Priced with the
price table (``dispatch.agents.pricing``), that is what the dispatcher holds against the
run's ``SpendLimit``: once the metered cost passes it, the executor ends the run's
process group and the run is ``over_budget``.

The meter is also what a run that never reached its own totals keeps: one that
timed out, stalled, was canceled or stopped, or went over budget records the
tokens and cost metered so far (``charge``), not nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from dispatch.agents.pricing import TokenUsage, api_cost_usd
from vigil.config import Price
from vigil.models import Outcome


@dataclass(frozen=True, slots=True)
class SpendLimit:
    """The most a run may spend, in USD, and why (one line for people)."""

    usd: float
    why: str


class Meter:
    """The usage of one run, by key (a message id, ``turns``): a key recorded again
    replaces its earlier figure, so a message reported on several lines counts once.
    Not thread-safe: fed from the run's line reader."""

    def __init__(self, prices: Mapping[str, Price] | None = None, limit: SpendLimit | None = None) -> None:
        self.prices: Mapping[str, Price] = prices or {}
        self.limit = limit
        self._usage: dict[str, tuple[str | None, TokenUsage]] = {}

    def record(self, key: str, model: str | None, usage: TokenUsage) -> None:
        """The usage ``key`` stands for, as reported now, of ``model``."""
        self._usage[key] = (model, usage)

    def usage_by_model(self) -> dict[str | None, TokenUsage]:
        totals: dict[str | None, TokenUsage] = {}
        for model, usage in self._usage.values():
            totals[model] = totals.get(model, TokenUsage()) + usage
        return totals

    @property
    def total(self) -> TokenUsage:
        return sum(self.usage_by_model().values(), TokenUsage())

    @property
    def cost_usd(self) -> float:
        """The metered usage at the price table (``[prices]``, then the shipped one)."""
        return sum(api_cost_usd(self.prices, model, usage) for model, usage in self.usage_by_model().items())

    @property
    def over(self) -> bool:
        """Whether the metered cost has passed the run's limit."""
        return self.limit is not None and self.cost_usd > self.limit.usd

    def over_budget_error(self) -> str:
        """Why the run was ended (only meaningful when ``over``)."""
        why = self.limit.why if self.limit is not None else "no limit"
        return f"over budget: the run had spent ${self.cost_usd:.4f}, past {why}; its process group was ended"

    def charge(self, outcome: Outcome) -> Outcome:
        """``outcome`` with the metered tokens and cost when it reports none of its
        own (its process was ended before the CLI said what it spent)."""
        if outcome.tokens_in or outcome.tokens_out or outcome.cache_read_tokens or outcome.cache_write_tokens:
            return outcome
        total = self.total
        if total == TokenUsage():
            return outcome
        cost = self.cost_usd
        models = [model for model in self.usage_by_model() if model]
        return replace(
            outcome,
            tokens_in=total.input,
            tokens_out=total.output,
            cache_read_tokens=total.cache_read,
            cache_write_tokens=total.cache_write,
            cost_usd=outcome.cost_usd or cost,
            api_cost_usd=outcome.api_cost_usd or cost,
            model=outcome.model or (models[0] if models else None),
        )
