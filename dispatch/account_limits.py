"""What a run's reports of its account's limits change, beyond the limit itself:
an account in a state only a person ends is held; an account whose ``reserve`` is
reached is limited until its window resets (``vigil.accounts``,
``vigil.limit_kinds``).

Each function returns the gate the loop needs (``GateCall``) when no account is
left to run on, or None; the guard trips it (``dispatch.guard``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from dispatch.accounts import pick
from dispatch.alerts import AlertHook, make_event
from vigil.accounts import (
    DEFAULT_ACCOUNT,
    HELD_UNTIL,
    RESERVE,
    RESUME_HINT,
    account_key,
    account_reserve,
    limit_account,
    read_limits,
    record_reports,
    reserve_breach,
)
from vigil.clock import iso_utc
from vigil.config import Settings
from vigil.gate import ACCOUNT, USAGE
from vigil.limit_kinds import last_rejected
from vigil.models import Outcome, OutcomeKind
from vigil.store import Store

log = logging.getLogger("vigil.guard")


@dataclass(frozen=True, slots=True)
class GateCall:
    """The gate the loop needs: ``until`` None when only a person lifts it, told
    ``fix``."""

    reason: str
    until: int | None
    kind: str
    fix: str = ""


async def hold_account(
    store: Store, settings: Settings, alerts: AlertHook, key: str, *, fix: str, outcome: Outcome, now_ms: int
) -> GateCall | None:
    """Account ``key`` is in a state only a person ends (``fix`` says what to do):
    hold it until ``vigil resume``. With another account free, an ``account_held``
    alert says so; with none, the loop is gated until the earliest reset of
    another, else until a person acts."""
    executor = key.split(":", 1)[0]
    rejected = last_rejected(outcome.limits)
    limits = await limit_account(
        store,
        key,
        until=HELD_UNTIL,
        reason=outcome.error or "no detail",
        now_ms=now_ms,
        in_a_row=0,
        kind=rejected.kind if rejected is not None else "",
        hold=fix,
    )
    where = pick(settings, executor, limits, now_ms)
    message = f"account {key} needs a person: {fix}; {RESUME_HINT}"
    if where.account is not None:
        log.info("%s; tasks run on %s:%s", message, where.executor, where.account)
        alerts.notify(make_event("account_held", message, now_ms, account=key, fix=fix, error=outcome.error))
        return None
    if where.free_at is not None and where.free_at < HELD_UNTIL:
        return GateCall(f"usage limit: every account is limited ({key} needs a person: {fix})", where.free_at, USAGE)
    return GateCall(f"{key} needs a person: {fix}; {RESUME_HINT}", None, ACCOUNT, f"{fix}, then run: vigil resume")


async def record_limits(
    store: Store, settings: Settings, executor: str, outcome: Outcome, now_ms: int
) -> GateCall | None:
    """Keep what a run on ``executor`` reported of its account's limit windows.
    With a ``reserve``: limit the account (kind ``reserve``) until the window that
    leaves less than it resets; free it when a later report leaves enough. A
    limit or hold already longer stands."""
    key = account_key(executor, outcome.account or DEFAULT_ACCOUNT)
    windows = await record_reports(store, key, outcome.limits, now_ms)
    if outcome.kind is OutcomeKind.USAGE_LIMITED:
        return None  # the limit itself says how long the account waits
    earlier = read_limits(await store.loop_values()).get(key)
    breach = reserve_breach(account_reserve(settings, key), windows, now_ms)
    reserved = earlier is not None and earlier.kind == RESERVE and earlier.limited(now_ms)
    if breach is None:
        if reserved and earlier is not None:  # a later report leaves more than the reserve
            await limit_account(
                store, key, until=now_ms, reason=earlier.reason, now_ms=now_ms, in_a_row=0, kind=RESERVE
            )
        return None
    until, why = breach
    if earlier is not None and earlier.limited(now_ms) and not reserved:
        return None  # held, or limited for longer: that stands
    limits = await limit_account(store, key, until=until, reason=why, now_ms=now_ms, in_a_row=0, kind=RESERVE)
    where = pick(settings, executor, limits, now_ms)
    if where.account is not None:
        log.info("account %s keeps its reserve until %s; tasks run on %s", key, iso_utc(until), where.account)
        return None
    return GateCall(f"every account is limited or keeps its reserve ({key} {why})", where.free_at or until, USAGE)
