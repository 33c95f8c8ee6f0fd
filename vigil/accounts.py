"""The agent CLIs' accounts, their usage limits and what is left of them, kept in
``loop_state``.

An agent executor (``claude``, ``codex``) runs on one of its accounts
(``[[executors.NAME.accounts]]``), or, with none configured, on the one its
variables in ``vigil run``'s environment select, named ``default``. A usage
limit stops only the account that met it, until its reset. Key ``accounts``, a
JSON object keyed ``"executor:account"``::

    {"claude:work": {"until": epoch_ms, "since": epoch_ms, "reason": str, "in_a_row": int,
                     "kind": str, "hold": str}}

``until`` is when the account may be used again (the provider's reset, or a
backoff when none was named); ``since`` when it was last limited (the least
recently limited free account is used first); ``in_a_row`` how many limits it met
with no successful run in between (the backoff grows with it); ``kind`` the
limit's kind (``five_hour``, ``seven_day`` …, ``reserve``; empty when not named,
``vigil.limit_kinds``). ``hold``, when set, is what a person must do: the account
is in a state only a person ends (a spend limit with no reset, usage turned off);
it is not used (``until`` is ``HELD_UNTIL``) until ``vigil resume``. An entry stays
after its ``until`` has passed: it still orders the accounts.

Key ``account_windows`` keeps, per account, the last report of each of its limit
windows (``LimitReport.to_json`` plus ``at``, when it came): what ``vigil status``
says is left. An account with a ``reserve`` whose CLI reports less than that share
of a window left is limited (kind ``reserve``) until that window resets, or until
a later report says more is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from vigil.clock import iso_utc
from vigil.config import AGENT_EXECUTORS, Settings
from vigil.durations import format_duration
from vigil.limit_kinds import SPEND_CONTROL, LimitReport, label, model_family
from vigil.store import Store

ACCOUNTS_KEY = "accounts"
WINDOWS_KEY = "account_windows"
DEFAULT_ACCOUNT = "default"  # an executor without configured accounts
HELD_UNTIL = 253_402_300_799_000  # 9999-12-31: a held account is never free by itself
RESERVE = "reserve"  # the kind of a limit the account's reserve set
RESUME_HINT = "then run vigil resume"
WEEK_MS = 7 * 86_400_000


@dataclass(frozen=True, slots=True)
class AccountLimit:
    """The last usage limit one account met. Times are epoch ms. ``hold``: what a
    person must do before the account is used again (empty: it frees itself)."""

    until: int
    since: int
    reason: str = ""
    in_a_row: int = 1
    kind: str = ""
    hold: str = ""

    def limited(self, now_ms: int) -> bool:
        return self.until > now_ms

    def to_json(self) -> dict[str, object]:
        value: dict[str, object] = {
            "until": self.until,
            "since": self.since,
            "reason": self.reason,
            "in_a_row": self.in_a_row,
        }
        if self.kind:
            value["kind"] = self.kind
        if self.hold:
            value["hold"] = self.hold
        return value

    @classmethod
    def from_json(cls, value: object) -> AccountLimit | None:
        if not isinstance(value, dict):
            return None
        until, since, in_a_row = value.get("until"), value.get("since"), value.get("in_a_row")
        if not isinstance(until, int) or not isinstance(since, int):
            return None
        count = in_a_row if isinstance(in_a_row, int) else 1
        reason, kind, hold = (str(value.get(name) or "") for name in ("reason", "kind", "hold"))
        return cls(until, since, reason, count, kind, hold)


def account_key(executor: str, account: str) -> str:
    return f"{executor}:{account}"


def account_names(settings: Settings, executor: str) -> tuple[str, ...]:
    """The accounts of ``executor`` in the configured order (``default`` when none is,
    or it is no agent CLI)."""
    cli = settings.agent_cli(executor)
    return tuple(account.name for account in cli.accounts) if cli and cli.accounts else (DEFAULT_ACCOUNT,)


def account_reserve(settings: Settings, key: str) -> float | None:
    """The ``reserve`` configured for account ``key`` (None: none)."""
    executor, _, name = key.partition(":")
    cli = settings.agent_cli(executor)
    found = [account.reserve for account in cli.accounts if account.name == name] if cli else []
    return found[0] if found else None


def read_limits(values: Mapping[str, object]) -> dict[str, AccountLimit]:
    """The limits stored in ``values`` (``Store.loop_values()``), by account key."""
    raw = values.get(ACCOUNTS_KEY)
    found = {}
    for key, value in raw.items() if isinstance(raw, dict) else ():
        limit = AccountLimit.from_json(value)
        if limit is not None:
            found[str(key)] = limit
    return found


@dataclass(frozen=True, slots=True)
class Window:
    """The last report of one limit window of an account, and when it came (epoch ms)."""

    report: LimitReport
    at: int

    def live(self, now_ms: int) -> bool:
        """Whether it still says something: its reset (if named) has not come."""
        return self.report.resets_at is None or self.report.resets_at > now_ms


def read_windows(values: Mapping[str, object]) -> dict[str, dict[str, Window]]:
    """Every account's windows stored in ``values``: key → kind → ``Window``."""
    raw = values.get(WINDOWS_KEY)
    found: dict[str, dict[str, Window]] = {}
    for key, kinds in raw.items() if isinstance(raw, dict) else ():
        for kind, value in kinds.items() if isinstance(kinds, dict) else ():
            report = LimitReport.from_json(value)
            at = value.get("at") if isinstance(value, dict) else None
            if report is not None and isinstance(at, int):
                found.setdefault(str(key), {})[str(kind)] = Window(report, at)
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
            entries[key] = replace(current, in_a_row=0).to_json()
        if await store.replace_loop_value(ACCOUNTS_KEY, raw, entries):
            return read_limits({ACCOUNTS_KEY: entries})


async def limit_account(
    store: Store, key: str, *, until: int, reason: str, now_ms: int, in_a_row: int, kind: str = "", hold: str = ""
) -> dict[str, AccountLimit]:
    """Record that account ``key`` met a usage limit (of ``kind``) at ``now_ms`` and
    may be used again at ``until`` (with ``hold``: only after a person did what it
    says, ``until`` is then ``HELD_UNTIL``); returns every account's limit as written."""
    until = HELD_UNTIL if hold else until
    return await _change(store, key, AccountLimit(until, now_ms, reason, in_a_row, kind, hold))


async def account_worked(store: Store, key: str, limits: Mapping[str, AccountLimit]) -> None:
    """A run on ``key`` got through: its limits in a row start again. Writes only
    when there is a count to reset (``limits`` as last read)."""
    current = limits.get(key)
    if current is not None and current.in_a_row:
        await _change(store, key, None)


async def release_holds(store: Store, *, now_ms: int) -> list[str]:
    """A person says the accounts that needed them are fixed (``vigil resume``):
    every held account is free again. Returns their keys."""
    while True:
        raw = (await store.loop_values()).get(ACCOUNTS_KEY)
        held = {key: limit for key, limit in read_limits({ACCOUNTS_KEY: raw}).items() if limit.hold}
        if not held:
            return []
        entries = dict(raw) if isinstance(raw, dict) else {}
        for key, limit in held.items():
            entries[key] = replace(limit, until=now_ms, hold="", in_a_row=0).to_json()
        if await store.replace_loop_value(ACCOUNTS_KEY, raw, entries):
            return sorted(held)


async def record_reports(store: Store, key: str, reports: Iterable[LimitReport], now_ms: int) -> dict[str, Window]:
    """Keep the last of ``reports`` for each window of account ``key`` (received at
    ``now_ms``); returns the account's windows as written. A report that names no
    use keeps the use last reported for the same window (the same reset): Claude
    Code names it only in warnings, so its silence is no drop. A report of a state
    of the account (``spend_control``) is no window: the account's hold keeps it."""
    latest = {report.kind: report for report in reports if report.kind != SPEND_CONTROL}
    while True:
        raw = (await store.loop_values()).get(WINDOWS_KEY)
        entries = dict(raw) if isinstance(raw, dict) else {}
        kinds = dict(entries.get(key) or {})
        for kind, report in latest.items():
            kinds[kind] = {**_keeping_use(report, LimitReport.from_json(kinds.get(kind))).to_json(), "at": now_ms}
        entries[key] = kinds
        if not latest or await store.replace_loop_value(WINDOWS_KEY, raw, entries):
            return read_windows({WINDOWS_KEY: entries}).get(key, {})


def _keeping_use(report: LimitReport, before: LimitReport | None) -> LimitReport:
    """``report``, with the use ``before`` named when it names none, is no
    rejection and is of the same window (the same reset)."""
    if report.utilization is not None or report.rejected or before is None or before.resets_at != report.resets_at:
        return report
    return replace(report, utilization=before.utilization)


def reserve_breach(reserve: float | None, windows: Mapping[str, Window], now_ms: int) -> tuple[int, str] | None:
    """When the account may run unattended again (the reset of the last window
    with less than ``reserve`` of it left) and why, or None while every window
    leaves at least that much (or no reserve is set)."""
    if reserve is None:
        return None
    short = [
        window.report
        for window in windows.values()
        if window.live(now_ms)
        and window.report.resets_at is not None
        and window.report.utilization is not None
        and 1 - window.report.utilization < reserve
    ]
    if not short:
        return None
    last = max(short, key=lambda report: report.resets_at or 0)
    used = round((last.utilization or 0) * 100)
    why = f"reserve: {label(last.kind)} window {used}% used, {round(reserve * 100)}% kept for you"
    return last.resets_at or now_ms, why


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
    set while it is limited; ``reason``, ``since`` and ``kind`` are those of its last
    limit; ``hold`` what a person must do (it waits for them); ``windows`` its
    limit windows still live, in the order reported; ``reserve`` its configured one."""

    executor: str
    account: str
    until: int | None = None
    reason: str | None = None
    since: int | None = None
    kind: str = ""
    hold: str = ""
    windows: tuple[LimitReport, ...] = field(default=())
    reserve: float | None = None

    @property
    def name(self) -> str:
        return account_key(self.executor, self.account)

    @property
    def state(self) -> str:
        """``free``, ``limited``, ``reserved`` (its reserve is reached) or
        ``needs_person``."""
        if self.hold:
            return "needs_person"
        if self.until is None:
            return "free"
        return "reserved" if self.kind == RESERVE else "limited"


def account_states(settings: Settings, values: Mapping[str, object], now_ms: int) -> list[AccountState]:
    """Every shown account (``shown_executors``), in the configured order."""
    limits = read_limits(values)
    windows = read_windows(values)
    states = []
    for executor in shown_executors(settings, limits):
        for name in account_names(settings, executor):
            key = account_key(executor, name)
            live = tuple(w.report for w in windows.get(key, {}).values() if w.live(now_ms))
            base = AccountState(executor, name, windows=live, reserve=account_reserve(settings, key))
            limit = limits.get(key)
            if limit is None:
                states.append(base)
                continue
            until = limit.until if limit.limited(now_ms) else None
            states.append(
                replace(base, until=until, reason=limit.reason, since=limit.since, kind=limit.kind, hold=limit.hold)
            )
    return states


def when_text(at_ms: int, now_ms: int) -> str:
    """A moment for people, in local time: ``14:00`` today, ``Mon 09:00`` within a
    week, else ``2026-12-24 09:00``."""
    moment = datetime.fromtimestamp(at_ms / 1000).astimezone()
    today = datetime.fromtimestamp(now_ms / 1000).astimezone().date()
    if moment.date() == today:
        return moment.strftime("%H:%M")
    if 0 <= at_ms - now_ms < WEEK_MS - 86_400_000:
        return moment.strftime("%a %H:%M")
    return moment.strftime("%Y-%m-%d %H:%M")


def window_text(report: LimitReport, now_ms: int) -> str:
    """``5h 62% used, resets 14:00`` (what is known of one window)."""
    text = label(report.kind)
    if report.utilization is not None:
        text += f" {round(report.utilization * 100)}% used"
    elif report.rejected:
        text += " used up"
    if report.resets_at is not None:
        text += f", resets {when_text(report.resets_at, now_ms)}"
    return text


def _window_json(report: LimitReport, now_ms: int) -> dict[str, object]:
    used = report.utilization
    return {
        "kind": report.kind or None,
        "label": label(report.kind),
        "status": report.status,
        "window_minutes": None if report.window_ms is None else report.window_ms // 60_000,
        "used_percent": None if used is None else round(used * 100, 1),
        "resets_at": iso_utc(report.resets_at),
        "resets_in_s": None if report.resets_at is None else max(0, report.resets_at - now_ms) // 1000,
        "text": window_text(report, now_ms),
        "overage_status": report.overage_status,
        "overage_reason": report.overage_reason,
    }


def accounts_json(settings: Settings, values: Mapping[str, object], now_ms: int) -> list[dict[str, object]]:
    """Every shown account's state for ``vigil status --json``: ``executor``,
    ``account``, ``state`` (``free``, ``limited``, ``reserved``, ``needs_person``),
    ``until`` (ISO 8601, while limited or reserved), ``until_in_s``, ``until_text``
    (local time for people), ``kind`` and ``kind_label`` of its last limit,
    ``reason`` of its last limit, ``model_family`` (while limited by one model's
    week: the only tasks it stops are on that family's models, or name none),
    ``limited_at``, ``fix`` (what a person must do,
    when it needs one), ``reserve``, and ``windows``: each live limit window's
    ``kind``, ``label``, ``status``, ``window_minutes``, ``used_percent``,
    ``resets_at``, ``resets_in_s``, ``text``, and what it said of usage credits,
    ``overage_status`` and ``overage_reason``."""
    shown: list[dict[str, object]] = []
    for state in account_states(settings, values, now_ms):
        waits = state.until is not None and not state.hold
        shown.append(
            {
                "executor": state.executor,
                "account": state.account,
                "state": state.state,
                "until": iso_utc(state.until) if waits else None,
                "until_in_s": max(0, (state.until or 0) - now_ms) // 1000 if waits else None,
                "until_text": when_text(state.until or 0, now_ms) if waits else None,
                "kind": state.kind or None,
                "kind_label": label(state.kind) if state.kind else None,
                "model_family": model_family(state.kind) if waits else None,
                "reason": state.reason,
                "limited_at": iso_utc(state.since),
                "fix": f"{state.hold}; {RESUME_HINT}" if state.hold else None,
                "reserve": state.reserve,
                "windows": [_window_json(report, now_ms) for report in state.windows],
            }
        )
    return shown


def account_line(account: Mapping[str, object]) -> str:
    """One account for people: ``claude:main free · 5h 62% used, resets 14:00``,
    ``codex:default limited (weekly) until Mon 09:00 (in 2d11h): usage limit …``,
    ``claude:main limited for Opus tasks (weekly Opus) until Mon 09:00 (in 2d11h): …``,
    ``claude:a reserved until 14:00 (in 1h10m): reserve: 5h window 85% used …``,
    ``claude:b needs you: its monthly spend limit is reached: …; then run vigil resume``."""
    name = f"{account['executor']}:{account['account']}"
    windows = account.get("windows")
    known = [str(w["text"]) for w in windows if isinstance(w, dict)] if isinstance(windows, list) else []
    if account["state"] == "needs_person":
        return f"{name} needs you: {account['fix']}"
    if account["state"] == "free":
        return " · ".join([f"{name} free", *known])
    wait = format_duration(int(str(account["until_in_s"])) * 1000)
    kind = f" ({account['kind_label']})" if account.get("kind_label") and account["state"] == "limited" else ""
    family = f" for {str(account['model_family']).capitalize()} tasks" if account.get("model_family") else ""
    reason = f": {account['reason']}" if account.get("reason") else ""
    line = f"{name} {account['state']}{family}{kind} until {account['until_text']} (in {wait}){reason}"
    return " · ".join([line, *known])
