"""API-equivalent cost from token counts and the ``[prices]`` table.

Prices are USD per million tokens, per model: input, output, cache read and cache
write. ``total_cost_usd`` from Claude Code is what the CLI reports (a proxy under a
subscription); this recomputation makes runs comparable across models and gives
Codex, which reports no cost, a figure at all.

Vigil ships a dated table (``SHIPPED_PRICES``, as published on ``PRICES_AS_OF``) for
the models the two CLIs report; ``[prices]`` in ``vigil.toml`` overrides an entry or
adds one, and is looked at first. A model in neither (one newer than the table, such
as ``claude-sonnet-5``) is priced at its family's price (``FAMILY_PRICES``: the
newest generation's price of ``claude-sonnet``, ``gpt-mini`` …), and the run says so
(``priced``'s ``by``). Only a model of no known family has no price at all: its
tokens count 0 here, a cap on its runs is metered by the CLI's own figure where it
reports one, and refused where it does not (``dispatch.meter``); ``vigil doctor``
names every such model in use.
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


# The newest generation's price of each family, for a model the table does not know
# yet (``claude-sonnet-5``). A family is the name without its version numbers
# (``family_of``); a family not here is looked up again without its last word
# (``gpt-5.9-pro`` → ``gpt-pro`` → ``gpt``). A higher price errs on the safe side.
FAMILY_PRICES: Mapping[str, Price] = {
    "claude-opus": Price(5.0, 25.0, 0.50, 6.25),
    "claude-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-haiku": Price(1.0, 5.0, 0.10, 1.25),
    "gpt": Price(5.0, 30.0, 0.50),
    "gpt-codex": Price(5.0, 30.0, 0.50),
    "gpt-mini": Price(0.75, 4.50, 0.075),
    "gpt-codex-mini": Price(0.75, 4.50, 0.075),
    "gpt-nano": Price(0.05, 0.40, 0.005),
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
    neither knows it (see ``priced`` for the family's price)."""
    return price_for(configured, model) or price_for(SHIPPED_PRICES, model)


def family_of(model: str) -> str:
    """``model``'s family: its name without version numbers, dates or a context-size
    suffix (``claude-sonnet-4-5-20250929`` → ``claude-sonnet``, ``gpt-5.4-mini`` →
    ``gpt-mini``, ``claude-3-5-haiku`` → ``claude-haiku``)."""
    words = model.split("[", 1)[0].split("-")
    return "-".join(word for word in words if word and not word[0].isdigit())


@dataclass(frozen=True, slots=True)
class Priced:
    """A model's price and where it came from (``by``, one phrase for people: "[prices]",
    "the price table of 2026-05-13", "the claude-sonnet family's price")."""

    price: Price
    by: str


def priced(configured: Mapping[str, Price], model: str | None) -> Priced | None:
    """``model``'s price: ``[prices]``, then the shipped table, then its family's
    (``FAMILY_PRICES``, the longest family name that is known); None for a model of
    no known family, or no model at all."""
    if model is None:
        return None
    own = price_for(configured, model)
    if own is not None:
        return Priced(own, "[prices]")
    shipped = price_for(SHIPPED_PRICES, model)
    if shipped is not None:
        return Priced(shipped, f"the price table of {PRICES_AS_OF}")
    words = family_of(model).split("-")
    while words:
        family = "-".join(words)
        if family in FAMILY_PRICES:
            return Priced(FAMILY_PRICES[family], f"the {family} family's price")
        words.pop()
    return None


def cost_at(price: Price, usage: TokenUsage) -> float:
    """USD for ``usage`` at ``price``."""
    return (
        usage.input * price.input
        + usage.output * price.output
        + usage.cache_read * price.cache_read
        + usage.cache_write * price.cache_write
    ) / PER_MILLION


def api_cost_usd(prices: Mapping[str, Price], model: str | None, usage: TokenUsage) -> float:
    """USD for ``usage`` of ``model`` at its price (``priced``: ``[prices]``, the
    shipped table, its family's); 0.0 for a model of no known family."""
    found = priced(prices, model)
    return 0.0 if found is None else cost_at(found.price, usage)
