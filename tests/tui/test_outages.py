"""The TUI on limits and outages: the header says how long the loop backs off, and
shows every account's state and reset, what is left of its windows and which one
needs a person; real SQLite, the real app under Pilot."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.tui.conftest import PROBE_S, AppFactory, wait_for
from tests.tui.helpers import queue
from tui.app import VigilApp
from vigil.accounts import limit_account, record_reports
from vigil.clock import ManualClock
from vigil.config import Account, Settings, load_settings
from vigil.gate import BACKOFF, trip
from vigil.limit_kinds import LimitReport
from vigil.store import Store, open_store

HOUR = 3_600_000


def header_line(app: VigilApp, part: str) -> str:
    return str(queue(app).query_one(part).render())


def two_accounts(home: Path) -> Settings:
    base = load_settings(home)
    accounts = (Account("a", config_dir=home / "a"), Account("b", config_dir=home / "b"))
    return replace(
        base, dispatch=replace(base.dispatch, executor="claude"), claude=replace(base.claude, accounts=accounts)
    )


async def test_the_header_says_how_long_the_loop_backs_off(make_app: AppFactory, db: Store, clock: ManualClock) -> None:
    app = make_app()
    async with app.run_test(size=(140, 30)):
        await wait_for(lambda: "loading" not in header_line(app, "#loop"), "header")
        now = clock.now_ms()
        reason = "backing off after 3 transient failures"
        await trip(db, reason=reason, until=now + 40_000, by="guard", now_ms=now, kind=BACKOFF)
        await wait_for(
            lambda: "backing off after 3 transient failures, next try in 40s" in header_line(app, "#gate"), "backoff"
        )


async def test_the_header_shows_every_account_and_when_a_limited_one_resets(
    db: Store, clock: ManualClock, home: Path
) -> None:
    settings = two_accounts(home)
    app = VigilApp(settings, opener=lambda: open_store(settings, clock), clock=clock, probe_interval_s=PROBE_S)
    async with app.run_test(size=(140, 30)):
        await wait_for(lambda: "claude:a free · claude:b free" in header_line(app, "#accounts"), "both free")
        now = clock.now_ms()
        await limit_account(db, "claude:b", until=now + 2 * HOUR, reason="limit", now_ms=now, in_a_row=1)
        await wait_for(
            lambda: "claude:a free · claude:b limited, resets in 2h00m" in header_line(app, "#accounts"), "b limited"
        )


async def test_the_header_says_what_is_left_of_each_account_and_which_needs_a_person(
    db: Store, clock: ManualClock, home: Path
) -> None:
    settings = two_accounts(home)
    app = VigilApp(settings, opener=lambda: open_store(settings, clock), clock=clock, probe_interval_s=PROBE_S)
    now = clock.now_ms()
    week = LimitReport("allowed_warning", "seven_day", now + 48 * HOUR, 0.5, 168 * HOUR)
    await record_reports(db, "claude:a", [week], now)
    await limit_account(
        db, "claude:b", until=0, reason="spend", now_ms=now, in_a_row=0, hold="its monthly spend limit is reached"
    )
    async with app.run_test(size=(200, 30)):
        await wait_for(
            lambda: (
                "claude:a free, weekly 50% used · claude:b needs you: its monthly spend limit is reached"
                in header_line(app, "#accounts")
            ),
            "a's week and b's hold",
        )
