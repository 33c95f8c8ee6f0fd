"""What one run has used so far, as its stream says it, priced; and what it may spend.

Every cap is metered or refused (docs/guardrails.md):

* a run's spend is the CLI's own total where it reports one (Claude Code's
  ``total_cost_usd``, at the end; its ``--max-budget-usd`` stops it by its running
  total), else its tokens at the price table (``dispatch.agents.pricing.priced``: ``[prices]``,
  the shipped table, then the model's family's price, said in ``runs.priced_by``);
* a cap on a run whose model has no price by any of those is refused before it
  starts (``meter_problem``: when the task is added, and when it is claimed);
* when the run ends, its final spend is held against the cap again
  (``reconcile``): a run that passed it is ``over_budget`` even when the overrun
  showed only in its last figures.

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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from dispatch.agents.pricing import TokenUsage, api_cost_usd, priced
from vigil.agent_clis import CLI_FACTS
from vigil.config import Price
from vigil.errors import InputError
from vigil.models import Outcome, OutcomeKind

# What an outcome of these kinds was decided by: neither the run nor its spend.
NOT_RECONCILED = frozenset({OutcomeKind.OVER_BUDGET, OutcomeKind.CANCELED, OutcomeKind.STOPPED})


@dataclass(frozen=True, slots=True)
class SpendLimit:
    """The most a run may spend, in USD, and why (one line for people). ``daily``:
    the daily budget's (the configuration's), not the task's own ``max_cost_usd``."""

    usd: float
    why: str
    daily: bool = False


class Unmetered(InputError):
    """A cap that cannot be metered: refused, never silently ignored. ``daily``: the
    daily budget's (every task would meet it: the loop is gated until a person changes
    the configuration), else the task's own (the task fails, saying why)."""

    def __init__(self, message: str, *, daily: bool = False) -> None:
        super().__init__(message)
        self.daily = daily


def meter_problem(executor: str, model: str | None, prices: Mapping[str, Price]) -> str | None:
    """Why a cap on a run of ``executor`` with ``model`` (None: not named) cannot be
    metered; None when it can: an executor that starts no agent CLI spends nothing
    Vigil could see, a CLI that reports its own cost is held by it, and any other's
    model needs a price (``dispatch.agents.pricing.priced``)."""
    cli = CLI_FACTS.get(executor)
    if cli is None or cli.cost_figure is not None:
        return None
    if model is None:
        return (
            f"{executor}'s model is not named ([executors.{executor}] model, the task's or skill's model), "
            f"and {executor} reports no cost of its own"
        )
    if priced(prices, model) is None:
        return (
            f"model {model!r} has no price (add [prices.{model!r}], USD per million tokens) "
            f"and {executor} reports no cost of its own"
        )
    return None


def priced_by(prices: Mapping[str, Price], models: Iterable[str | None], figure: str | None = None) -> str | None:
    """How a run's spend was priced, one line for its record (``runs.priced_by``):
    the CLI's own figure (``figure``) where it gave one, then each model's tokens and
    what priced them; None when the run used no model."""
    shown = []
    for model in sorted({m for m in models if m}):
        found = priced(prices, model)
        shown.append(f"{model} at {found.by}" if found is not None else f"{model} unpriced")
    tokens = f"tokens: {', '.join(shown)}" if shown else ""
    parts = [part for part in (figure, tokens) if part]
    return "; ".join(parts) or None


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
        """The metered usage at its prices (``[prices]``, the shipped table, the
        model's family's); a model of none counts 0 (``unpriced``)."""
        return sum(api_cost_usd(self.prices, model, usage) for model, usage in self.usage_by_model().items())

    def unpriced(self, model: str | None) -> bool:
        """Whether ``model`` (as a stream names it) has no price to meter it by."""
        return priced(self.prices, model) is None

    @property
    def over(self) -> bool:
        """Whether the metered cost has passed the run's limit."""
        return self.limit is not None and self.cost_usd > self.limit.usd

    def over_budget_error(self) -> str:
        """Why the run was ended (only meaningful when ``over``)."""
        why = self.limit.why if self.limit is not None else "no limit"
        return f"over budget: the run had spent ${self.cost_usd:.4f}, past {why}; its process group was ended"

    def reconcile(self, outcome: Outcome) -> Outcome:
        """``outcome`` held against the run's limit once more, with its final spend
        (the CLI's own total where it reports one, else the metered tokens): past
        the limit it is ``over_budget``, whatever the run said, unless a person's
        cancel or a stop decided it. Its costs and tokens are kept."""
        limit = self.limit
        if limit is None or outcome.kind in NOT_RECONCILED or outcome.cost_usd <= limit.usd:
            return outcome
        error = (
            f"over budget: the run spent ${outcome.cost_usd:.4f} in all, past {limit.why} "
            "(the overrun showed when the run ended)"
        )
        return replace(outcome, kind=OutcomeKind.OVER_BUDGET, error=error, summary=error, retry_at=None)

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
