"""The Anthropic API's unified rate-limit headers, as a subscription's answers carry
them, for the local model server: Claude Code 2.1.197 turns them into
``rate_limit_event`` lines (``vigil.limit_kinds``) for a subscription login.

A header ``anthropic-ratelimit-unified-<w>-surpassed-threshold`` on an answer makes
an ``allowed_warning`` event with that window's ``utilization`` and reset; a 429
with ``…-unified-status: rejected`` and ``…-representative-claim`` makes a
``rejected`` event of that kind, with ``resetsAt`` only when ``…-unified-reset`` is
sent. ``…-overage-status`` and ``…-overage-disabled-reason`` say what became of the
usage credits beyond the plan.
"""

from __future__ import annotations

from tests.agents.model_server import HttpError, Text

UNIFIED = "anthropic-ratelimit-unified-"
ABBREVIATIONS = {"five_hour": "5h", "seven_day": "7d", "overage": "overage"}


def used(kind: str, utilization: float, reset_s: int, text: str = "Done.") -> Text:
    """An answer whose headers say ``kind``'s window is ``utilization`` used (a
    threshold passed: Claude Code reports it) and resets at ``reset_s``."""
    short = ABBREVIATIONS[kind]
    headers = (
        (f"{UNIFIED}status", "allowed_warning"),
        (f"{UNIFIED}reset", str(reset_s)),
        (f"{UNIFIED}representative-claim", kind),
        (f"{UNIFIED}{short}-utilization", str(utilization)),
        (f"{UNIFIED}{short}-reset", str(reset_s)),
        (f"{UNIFIED}{short}-surpassed-threshold", "0.5"),
    )
    return Text(text, headers=headers)


def allowed_without_credits(reset_s: int, text: str = "Done.") -> Text:
    """An answer from an account whose organisation turned usage credits off: an
    allowed session that carries ``overageStatus: rejected`` (smithers#1342)."""
    headers = (
        (f"{UNIFIED}status", "allowed"),
        (f"{UNIFIED}reset", str(reset_s)),
        (f"{UNIFIED}representative-claim", "five_hour"),
        (f"{UNIFIED}overage-status", "rejected"),
        (f"{UNIFIED}overage-disabled-reason", "org_level_disabled"),
    )
    return Text(text, headers=headers)


def rejected(
    kind: str | None, reset_s: int | None, *, overage_reason: str | None = None, overage_reset_s: int | None = None
) -> HttpError:
    """429: the account's ``kind`` limit is reached (None: no kind named), resetting
    at ``reset_s`` (None: no reset named); ``overage_reason`` why usage credits do
    not take over."""
    headers = [("retry-after", "1"), (f"{UNIFIED}status", "rejected")]
    if kind is not None:
        headers.append((f"{UNIFIED}representative-claim", kind))
    if reset_s is not None:
        headers.append((f"{UNIFIED}reset", str(reset_s)))
    if overage_reason is not None:
        headers += [(f"{UNIFIED}overage-status", "rejected"), (f"{UNIFIED}overage-disabled-reason", overage_reason)]
    if overage_reset_s is not None:
        headers.append((f"{UNIFIED}overage-reset", str(overage_reset_s)))
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limited"}}
    return HttpError(429, body, tuple(headers))
