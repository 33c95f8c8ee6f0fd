"""The agent CLIs' accounts and their usage limits, kept in ``loop_state``.

An agent executor (``claude``, ``codex``) runs on one of its accounts
(``[[executors.NAME.accounts]]``), or, with none configured, on the one its
variables in ``vigil run``'s environment select, named ``default``. A usage
limit stops only the account that met it, until its reset. Key ``accounts``, a
JSON object keyed ``"executor:account"``::

    {"claude:work": {"until": epoch_ms, "since": epoch_ms, "reason": str, "in_a_row": int}}

``until`` is when the account may be used again (the provider's reset, or a
backoff when none was named); ``since`` when it was last limited (the least
recently limited free account is used first); ``in_a_row`` how many limits it met
with no successful run in between (the backoff grows with it). An entry stays
after its ``until`` has passed: it still orders the accounts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vigil.clock import iso_utc
from vigil.config import AGENT_EXECUTORS, Settings
from vigil.durations import format_duration
from vigil.store import Store

ACCOUNTS_KEY = "accounts"
DEFAULT_ACCOUNT = "default"  # an executor without configured accounts


@dataclass(frozen=True, slots=True)
class AccountLimit:
    """The last usage limit one account met. Times are epoch ms."""

    until: int
    since: int
    reason: str = ""
    in_a_row: int = 1

    def limited(self, now_ms: int) -> bool:
        return self.until > now_ms

    def to_json(self) -> dict[str, object]:
        return {"until": self.until, "since": self.since, "reason": self.reason, "in_a_row": self.in_a_row}

    @classmethod
    def from_json(cls, value: object) -> AccountLimit | None:
        if not isinstance(value, dict):
            return None
        until, since, in_a_row = value.get("until"), value.get("since"), value.get("in_a_row")
        if not isinstance(until, int) or not isinstance(since, int):
            return None
        count = in_a_row if isinstance(in_a_row, int) else 1
        return cls(until, since, str(value.get("reason") or ""), count)


def account_key(executor: str, account: str) -> str:
    return f"{executor}:{account}"


def account_names(settings: Settings, executor: str) -> tuple[str, ...]:
    """The accounts of ``executor`` in the configured order (``default`` when none is,
    or it is no agent CLI)."""
    cli = settings.agent_cli(executor)
    return tuple(account.name for account in cli.accounts) if cli and cli.accounts else (DEFAULT_ACCOUNT,)


def read_limits(values: Mapping[str, object]) -> dict[str, AccountLimit]:
    """The limits stored in ``values`` (``Store.loop_values()``), by account key."""
    raw = values.get(ACCOUNTS_KEY)
    found = {}
    for key, value in raw.items() if isinstance(raw, dict) else ():
        limit = AccountLimit.from_json(value)
        if limit is not None:
            found[str(key)] = limit
    return found


async def _change(store: Store, key: str, change: object) -> dict[str, AccountLimit]:
    """Replace (``change`` an ``AccountLimit``) or reset the count of (``change``
    None) one account's entry, as a compare-and-set on the whole value; returns the
    limits as written."""
    while True:
        raw = (await store.loop_values()).get(ACCOUNTS_KEY)
        entries = dict(raw) if isinstance(raw, dict) else {}
        if isinstance(change, AccountLimit):
            entries[key] = change.to_json()
        else:
            current = AccountLimit.from_json(entries.get(key))
            if current is None or current.in_a_row == 0:
                return read_limits({ACCOUNTS_KEY: entries})
            entries[key] = AccountLimit(current.until, current.since, current.reason, 0).to_json()
        if await store.replace_loop_value(ACCOUNTS_KEY, raw, entries):
            return read_limits({ACCOUNTS_KEY: entries})


async def limit_account(
    store: Store, key: str, *, until: int, reason: str, now_ms: int, in_a_row: int
) -> dict[str, AccountLimit]:
    """Record that account ``key`` met a usage limit at ``now_ms`` and may be used
    again at ``until``; returns every account's limit as written."""
    return await _change(store, key, AccountLimit(until, now_ms, reason, in_a_row))


async def account_worked(store: Store, key: str, limits: Mapping[str, AccountLimit]) -> None:
    """A run on ``key`` got through: its limits in a row start again. Writes only
    when there is a count to reset (``limits`` as last read)."""
    current = limits.get(key)
    if current is not None and current.in_a_row:
        await _change(store, key, None)


def shown_executors(settings: Settings, limits: Mapping[str, AccountLimit]) -> list[str]:
    """The agent executors whose accounts ``vigil status`` and the TUI show: the
    configured one, the fallbacks, any with accounts configured, any with a limit."""
    used = {settings.dispatch.executor, *settings.dispatch.fallback}
    used |= {name for name, cli in settings.agent_clis.items() if cli.accounts}
    used |= {key.split(":", 1)[0] for key in limits}
    return [name for name in AGENT_EXECUTORS if name in used]


@dataclass(frozen=True, slots=True)
class AccountState:
    """One account as ``vigil status`` and the TUI show it. ``until`` (epoch ms) is
    set while it is limited; ``reason`` and ``since`` are those of its last limit."""

    executor: str
    account: str
    until: int | None = None
    reason: str | None = None
    since: int | None = None

    @property
    def name(self) -> str:
        return account_key(self.executor, self.account)


def account_states(settings: Settings, values: Mapping[str, object], now_ms: int) -> list[AccountState]:
    """Every shown account (``shown_executors``), in the configured order."""
    limits = read_limits(values)
    states = []
    for executor in shown_executors(settings, limits):
        for name in account_names(settings, executor):
            limit = limits.get(account_key(executor, name))
            if limit is None:
                states.append(AccountState(executor, name))
                continue
            until = limit.until if limit.limited(now_ms) else None
            states.append(AccountState(executor, name, until, limit.reason, limit.since))
    return states


def accounts_json(settings: Settings, values: Mapping[str, object], now_ms: int) -> list[dict[str, object]]:
    """Every shown account's state for ``vigil status --json``: ``executor``,
    ``account``, ``state`` (``free`` or ``limited``), ``until`` (ISO 8601, while
    limited), ``until_in_s``, ``reason`` of its last limit, ``limited_at``."""
    return [
        {
            "executor": state.executor,
            "account": state.account,
            "state": "free" if state.until is None else "limited",
            "until": iso_utc(state.until),
            "until_in_s": None if state.until is None else max(0, state.until - now_ms) // 1000,
            "reason": state.reason,
            "limited_at": iso_utc(state.since),
        }
        for state in account_states(settings, values, now_ms)
    ]


def account_line(account: Mapping[str, object]) -> str:
    """``claude:work limited until 2026-…Z (in 2h05m): usage limit …`` or ``claude:me free``."""
    name = f"{account['executor']}:{account['account']}"
    if account["state"] != "limited":
        return f"{name} free"
    wait = format_duration(int(str(account["until_in_s"])) * 1000)
    reason = f": {account['reason']}" if account.get("reason") else ""
    return f"{name} limited until {account['until']} (in {wait}){reason}"
