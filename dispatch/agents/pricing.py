"""API-equivalent cost from token counts and the ``[prices]`` table.

Prices are USD per million tokens, per model: input, output, cache read and cache
write. ``total_cost_usd`` from Claude Code is what the CLI reports (a proxy under a
subscription); this recomputation makes runs comparable across models and gives
Codex, which reports no cost, a figure at all.

Vigil ships a dated table (``SHIPPED_PRICES``, as published on ``PRICES_AS_OF``) for
the models the two CLIs report; ``[prices]`` in ``vigil.toml`` overrides an entry or
adds one, and is looked at first. A model in neither costs 0 here (``vigil doctor``
warns when a budget is set and the executor's model has no price).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vigil.config import Price

PER_MILLION = 1_000_000
PRICES_AS_OF = "2026-05-13"
# The longest entry that is a prefix up to a "-" wins, so a family entry prices the
# dated and numbered names after it (``claude-sonnet-4`` prices
# ``claude-sonnet-4-5-20250929``, ``gpt-5`` prices ``gpt-5-codex``), an older
# generation at another price is named apart (``claude-opus-4-1``), and a newer
# version is never priced as an older one (``gpt-5`` does not price ``gpt-5.6``).
SHIPPED_PRICES: Mapping[str, Price] = {
    # Anthropic: cache write is the 5-minute write (1.25 × input), cache read 0.1 × input
    "claude-opus-4": Price(5.0, 25.0, 0.50, 6.25),  # Opus 4.5 and later
    "claude-opus-4-0": Price(15.0, 75.0, 1.50, 18.75),
    "claude-opus-4-1": Price(15.0, 75.0, 1.50, 18.75),
    "claude-opus-4-20250514": Price(15.0, 75.0, 1.50, 18.75),
    "claude-sonnet-4": Price(3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4": Price(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    # OpenAI: cached input is read from the cache; OpenAI charges no cache write
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-5.1": Price(1.25, 10.0, 0.125),
    "gpt-5.1-codex-mini": Price(0.25, 2.0, 0.025),
    "gpt-5.2": Price(1.75, 14.0, 0.175),
    "gpt-5.3": Price(1.75, 14.0, 0.175),
    "gpt-5.4": Price(2.50, 15.0, 0.25),
    "gpt-5.4-mini": Price(0.75, 4.50, 0.075),
    "gpt-5.5": Price(5.0, 30.0, 0.50),
}


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
    """The price of ``model`` in ``prices``: an exact entry, else the longest entry
    that is a prefix of the name ending where a ``-`` follows (``claude-opus-4``
    prices ``claude-opus-4-6``); None if there is none. A context-size suffix
    (``claude-opus-4-6[1m]``) is ignored."""
    if model is None:
        return None
    model = model.split("[", 1)[0]
    if model in prices:
        return prices[model]
    matches = [name for name in prices if model.startswith(name + "-")]
    return prices[max(matches, key=len)] if matches else None


def model_price(configured: Mapping[str, Price], model: str | None) -> Price | None:
    """The price of ``model``: ``[prices]`` first, then the shipped table; None when
    neither knows it."""
    return price_for(configured, model) or price_for(SHIPPED_PRICES, model)


def api_cost_usd(prices: Mapping[str, Price], model: str | None, usage: TokenUsage) -> float:
    """USD for ``usage`` of ``model`` at ``prices`` (``[prices]``), else at the
    shipped prices; 0.0 for a model neither knows."""
    price = model_price(prices, model)
    if price is None:
        return 0.0
    return (
        usage.input * price.input
        + usage.output * price.output
        + usage.cache_read * price.cache_read
        + usage.cache_write * price.cache_write
    ) / PER_MILLION
