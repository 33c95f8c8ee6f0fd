"""API-equivalent cost from token counts and the ``[prices]`` table.

Prices are USD per million tokens, per model: input, output, cache read and cache
write. ``total_cost_usd`` from Claude Code is what the CLI reports (a proxy under a
subscription); this recomputation makes runs comparable across models and gives
Codex, which reports no cost, a figure at all. A model missing from the table costs
0 here: the price table is advisory and never stops a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vigil.config import Price

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class TokenUsage:
    """Token counts of one model. ``input`` excludes cached tokens, which are counted
    in ``cache_read`` (read from the cache) and ``cache_write`` (written to it)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )


def price_for(prices: Mapping[str, Price], model: str | None) -> Price | None:
    """The price of ``model``: an exact entry, else the longest entry that is a prefix
    of the name (``claude-opus-4`` prices ``claude-opus-4-6``); None if there is none."""
    if model is None:
        return None
    if model in prices:
        return prices[model]
    matches = [name for name in prices if model.startswith(name)]
    return prices[max(matches, key=len)] if matches else None


def api_cost_usd(prices: Mapping[str, Price], model: str | None, usage: TokenUsage) -> float:
    """USD for ``usage`` of ``model`` at the configured prices; 0.0 for an unpriced model."""
    price = price_for(prices, model)
    if price is None:
        return 0.0
    return (
        usage.input * price.input
        + usage.output * price.output
        + usage.cache_read * price.cache_read
        + usage.cache_write * price.cache_write
    ) / PER_MILLION
