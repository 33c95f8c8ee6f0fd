"""Usage limits by kind: what an agent CLI reported about an account's limits, and
which of its states only a person can end.

Claude Code 2.1.197 prints a ``rate_limit_event`` (subscription logins only) each
time what the API's ``anthropic-ratelimit-unified-*`` headers say changes::

    {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed" | "allowed_warning" | "rejected",
     "rateLimitType": "five_hour" | "seven_day" | "seven_day_opus" | "seven_day_sonnet"
                      | "seven_day_overage_included" | "overage",
     "resetsAt": <epoch s>, "utilization": 0.62, "overageStatus": …, "overageResetsAt": …,
     "overageDisabledReason": "org_level_disabled" | "org_level_disabled_until" | "out_of_credits" | …}}

``utilization`` (the share of the window used) comes only with ``allowed_warning``
(the API said a threshold was passed). Codex 0.171.0 keeps the same facts in its
session file's ``token_count`` events (``rate_limits``: ``primary`` and
``secondary``, each ``used_percent``, ``window_minutes``, ``resets_at``), read by
``dispatch.agents.codex.usage``.

A rejected limit that names a reset ends by itself: the account waits for it. A
rejection that names none while the account's usage credits are refused for a
reason (``overageDisabledReason``: a monthly spend limit reached, credits used up,
usage turned off by the organisation, a seat without usage) is a state of the
account only a person ends (``person_fix``): it is never waited out or retried as
a limit. An ``allowed`` event that carries a refused overage (``org_level_disabled``
on an account that still has its plan's usage) is only information.

Codex 0.171.0 names such states in its session file's ``rate_limits``:
``rate_limit_reached_type`` (from the API's ``x-codex-rate-limit-reached-type`` on a
429 ``usage_limit_reached``) ``workspace_owner_credits_depleted``,
``workspace_member_credits_depleted``, ``workspace_owner_usage_limit_reached`` or
``workspace_member_usage_limit_reached`` (``rate_limit_reached`` is a window used
up, which resets), or ``spend_control_reached: true``; read as a rejection of kind
``spend_control`` with that name as its reason. It says them in prose too ("You hit
your spend cap set in your workspace …", "Your workspace is out of credits …"), and
two more that only a person ends: a ChatGPT plan without Codex ("To use Codex with
your ChatGPT plan, upgrade to Plus …", a 429 ``usage_not_included``) and an API key
out of quota ("Quota exceeded. Check your plan and billing details.").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

HOUR_MS = 3_600_000
REJECTED = "rejected"
# Claude Code's rateLimitType → the window's length (Codex names its windows in minutes)
WINDOW_MS = {
    "five_hour": 5 * HOUR_MS,
    "seven_day": 168 * HOUR_MS,
    "seven_day_opus": 168 * HOUR_MS,
    "seven_day_sonnet": 168 * HOUR_MS,
    "seven_day_overage_included": 168 * HOUR_MS,
}
# how people call each kind ("claude:main: free · 5h 62% used")
LABELS = {
    "five_hour": "5h",
    "seven_day": "weekly",
    "seven_day_opus": "weekly Opus",
    "seven_day_sonnet": "weekly Sonnet",
    "seven_day_overage_included": "weekly, one model",
    "overage": "usage credits",
    "reserve": "reserve",
    "spend_control": "spend control",
}
# The kind of a report that says an account's workspace stopped it (Codex): a state
# of the account, not a window (``vigil.accounts.record_reports`` keeps no window of it)
SPEND_CONTROL = "spend_control"
# overageDisabledReason → what a person must do about the account (no reset named)
_SPEND_LIMIT = "its monthly spend limit is reached: raise it at claude.ai/settings/usage (or ask its admin)"
_FIXES = {
    "org_level_disabled_until": _SPEND_LIMIT,
    "org_spend_cap_reached": _SPEND_LIMIT,
    "out_of_credits": "it is out of usage credits: add credits at claude.ai/settings/usage",
    "org_level_disabled": "its organisation turned its usage off (org_level_disabled): an admin must turn it on",
    "org_service_level_disabled": "this service is disabled for its organisation: an admin must enable it",
    "seat_tier_level_disabled": "its seat type includes no usage (seat_tier_level_disabled): ask its admin",
    "seat_tier_zero_credit_limit": "its seat type includes no usage (seat_tier_zero_credit_limit): ask its admin",
    "member_level_disabled": "its admin disabled its usage allocation (member_level_disabled): ask its admin",
    "member_zero_credit_limit": "its admin set its usage to $0 (member_zero_credit_limit): ask its admin",
    "group_zero_credit_limit": "its group's usage limit is $0 (group_zero_credit_limit): ask its admin",
    # Codex 0.171.0: rate_limits.rate_limit_reached_type (the API's x-codex-rate-limit-reached-type)
    "workspace_owner_credits_depleted": "its ChatGPT workspace is out of credits: add credits to the workspace",
    "workspace_member_credits_depleted": "its ChatGPT workspace is out of credits: ask the workspace's owner for more",
    "workspace_owner_usage_limit_reached": "the spend cap set in its ChatGPT workspace is reached: raise the spend cap",
    "workspace_member_usage_limit_reached": (
        "the spend cap its ChatGPT workspace's owner set for it is reached: ask an owner to raise it"
    ),
    # Codex 0.171.0: rate_limits.spend_control_reached
    "spend_control_reached": "its ChatGPT workspace's spend control is reached: raise the spend cap (or ask its owner)",
}
# Codex's rate_limit_reached_type values that only a person ends (the other one,
# ``rate_limit_reached``, is a window used up: it resets)
CODEX_PERMANENT = frozenset(name for name in _FIXES if name.startswith("workspace_"))
_NOT_INCLUDED = "its ChatGPT plan does not include Codex: upgrade the plan, or use another account"
_QUOTA = "its API key's quota is used up: check its plan and billing at platform.openai.com"
# The same states when a CLI says them only in prose (an older CLI, an API key, a
# message passed on as text): the pattern and the fix. Only without a reset named.
_PROSE_FIXES = (
    (re.compile(r"monthly (?:spend|usage) limit", re.IGNORECASE), _SPEND_LIMIT),
    (re.compile(r"out of usage credits|org is out of usage", re.IGNORECASE), _FIXES["out_of_credits"]),
    (re.compile(r"service is disabled for your org", re.IGNORECASE), _FIXES["org_service_level_disabled"]),
    (re.compile(r"seat type doesn't include", re.IGNORECASE), "its seat type includes no usage: ask its admin"),
    (re.compile(r"usage allocation has been disabled", re.IGNORECASE), _FIXES["member_level_disabled"]),
    (re.compile(r"usage limit is set to \$0", re.IGNORECASE), _FIXES["group_zero_credit_limit"]),
    # Codex 0.171.0's messages for the same states (codex-rs UsageLimitReachedError, CodexErr)
    (
        re.compile(r"workspace is out of credits\. Ask your workspace owner", re.IGNORECASE),
        _FIXES["workspace_member_credits_depleted"],
    ),
    (re.compile(r"workspace is out of credits", re.IGNORECASE), _FIXES["workspace_owner_credits_depleted"]),
    (
        re.compile(r"spend cap set by the owner of your workspace", re.IGNORECASE),
        _FIXES["workspace_member_usage_limit_reached"],
    ),
    (re.compile(r"spend cap set in your workspace", re.IGNORECASE), _FIXES["workspace_owner_usage_limit_reached"]),
    (re.compile(r"To use Codex with your ChatGPT plan", re.IGNORECASE), _NOT_INCLUDED),
    (re.compile(r"Quota exceeded\. Check your plan and billing", re.IGNORECASE), _QUOTA),
)
_RESET_NAMED = re.compile(r"\bresets?\b|try again at|regain access", re.IGNORECASE)
# prose that says an account's usage is over, whatever kind (for the classifiers)
ACCOUNT_LIMIT_TEXT = re.compile(
    r"hit your (?:[\w']+ ){0,3}limit|usage limit|out of usage credits|org is out of usage|"
    r"service is disabled for your org|seat type doesn't include|usage allocation has been disabled|"
    r"workspace is out of credits|hit your spend cap|To use Codex with your ChatGPT plan|Quota exceeded",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class LimitReport:
    """What an agent CLI said about one of an account's limits during a run.

    ``status``: ``allowed``, ``allowed_warning`` or ``rejected``; ``kind``: the
    window (``five_hour``, ``seven_day`` …, ``overage``; empty when not named);
    ``resets_at`` (epoch ms) when it resets; ``utilization`` the share of it used
    (0–1, None when not reported); ``window_ms`` its length when known; the
    ``overage_*`` fields what it said of usage credits beyond the plan."""

    status: str
    kind: str = ""
    resets_at: int | None = None
    utilization: float | None = None
    window_ms: int | None = None
    overage_status: str | None = None
    overage_reason: str | None = None

    @property
    def rejected(self) -> bool:
        return self.status == REJECTED

    def to_json(self) -> dict[str, object]:
        value: dict[str, object] = {"status": self.status, "kind": self.kind}
        for name in ("resets_at", "utilization", "window_ms", "overage_status", "overage_reason"):
            if getattr(self, name) is not None:
                value[name] = getattr(self, name)
        return value

    @classmethod
    def from_json(cls, value: object) -> LimitReport | None:
        if not isinstance(value, dict) or not isinstance(value.get("status"), str):
            return None
        resets, used, window = value.get("resets_at"), value.get("utilization"), value.get("window_ms")
        over, why = value.get("overage_status"), value.get("overage_reason")
        return cls(
            status=value["status"],
            kind=str(value.get("kind") or ""),
            resets_at=resets if isinstance(resets, int) else None,
            utilization=float(used) if isinstance(used, int | float) and not isinstance(used, bool) else None,
            window_ms=window if isinstance(window, int) else None,
            overage_status=over if isinstance(over, str) else None,
            overage_reason=why if isinstance(why, str) else None,
        )


# The limits of one model's week (Claude Code's rateLimitType) → the model family they
# stop: a model whose name holds it ("claude-opus-4-6", "opus")
MODEL_FAMILIES = {"seven_day_opus": "opus", "seven_day_sonnet": "sonnet"}


def model_family(kind: str) -> str | None:
    """The model family a limit of ``kind`` stops (None: every model)."""
    return MODEL_FAMILIES.get(kind)


def stops_model(kind: str, model: str | None) -> bool:
    """Whether a limit of ``kind`` stops a run on ``model``. A model not known
    (None: no task, skill or configuration names one, so the CLI picks its own) is
    stopped by every limit: which model the CLI would pick cannot be known."""
    family = model_family(kind)
    return family is None or model is None or family in model.lower()


def label(kind: str) -> str:
    """How people call a limit of ``kind`` (``5h``, ``weekly`` …; ``usage`` when unnamed)."""
    if kind in LABELS:
        return LABELS[kind]
    return kind.replace("_", " ") if kind else "usage"


def window_kind(minutes: int) -> str:
    """A window named by its length (Codex): ``five_hour``, ``seven_day``, else ``<n>m``."""
    for kind, length in WINDOW_MS.items():
        if length == minutes * 60_000:
            return kind
    return f"{minutes}m"


def last_rejected(reports: Iterable[LimitReport]) -> LimitReport | None:
    """The last rejection among ``reports`` (None: none)."""
    found = None
    for report in reports:
        if report.rejected:
            found = report
    return found


def person_fix(reports: Iterable[LimitReport], text: str | None) -> str | None:
    """What a person must do about an account that a run found unusable for good
    (a rejection with no reset and a reason its credits are refused, or the same
    said in prose with no reset), or None when the limit ends by itself."""
    rejected = last_rejected(reports)
    if rejected is not None:
        if rejected.resets_at is not None or not rejected.overage_reason:
            return None  # a reset named, or no reason given: a limit that is waited out
        reason = rejected.overage_reason
        return _FIXES.get(reason, f"it has no usage left and no reset was named ({reason}): check the account")
    if not text or _RESET_NAMED.search(text):
        return None
    return next((fix for pattern, fix in _PROSE_FIXES if pattern.search(text)), None)
