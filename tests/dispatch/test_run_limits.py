"""What the dispatcher hands each run: the most it may spend (its task's own limit
less what earlier runs spent, the daily budget's room unless it is urgent), the
stall timeout, and the account it runs on with the environment that selects it.
A run canceled mid-way keeps what its stream carried."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from dispatch.accounts import account_env
from dispatch.agents.pricing import TokenUsage
from dispatch.executors import RunContext
from tests.dispatch.conftest import MakeDispatcher, write_skill
from vigil.accounts import limit_account
from vigil.clock import ManualClock
from vigil.config import Account, BudgetSettings, Price, Settings
from vigil.models import NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store.sqlite import SqliteStore


def succeed(task: Task, ctx: RunContext) -> Outcome:
    return Outcome(OutcomeKind.SUCCESS, cost_usd=0.3)


async def test_a_run_may_spend_what_is_left_of_its_tasks_limit_and_of_the_daily_budget(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, home: Path
) -> None:
    budgeted = replace(settings, budget=BudgetSettings(daily_usd=1.0, urgent_priority=2))
    write_skill(home, "capped", "description: Capped.\nmax_cost_usd: 5")
    dispatcher, fake = make_dispatcher(succeed, settings=budgeted)
    await db.add_task(NewTask("own limit", max_cost_usd=0.5, max_retries=3, priority=3))
    await db.add_task(NewTask("skill's limit", skills=("capped",), priority=4))
    await db.add_task(NewTask("urgent", priority=1))
    for _ in range(3):  # in order of priority: urgent, own limit, skill's limit
        await dispatcher.run_once()
    limits = [ctx.meter.limit for _, ctx in fake.calls]
    assert limits[0] is None  # urgent: it may run above the daily cap
    assert limits[1] is not None
    assert (limits[1].usd, limits[1].why) == (0.5, "the task's max_cost_usd of $0.50")  # the day has $0.70 left
    assert limits[2] is not None  # the skill allows $5, but the day has $0.40 left
    assert limits[2].usd == 1.0 - 0.6
    assert limits[2].why == "the daily budget of $1.00 ($0.60 spent in the last 24 h)"
    assert [ctx.stall_timeout_s for _, ctx in fake.calls] == [600.0] * 3


async def test_a_canceled_run_keeps_the_tokens_its_stream_carried(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings
) -> None:
    metered = asyncio.Event()

    async def stream_then_hang(task: Task, ctx: RunContext) -> Outcome:
        ctx.meter.record("msg_1", "m", TokenUsage(input=4000, output=7))
        metered.set()
        await asyncio.sleep(600)
        return Outcome(OutcomeKind.SUCCESS)

    priced = replace(settings, prices={"m": Price(input=10.0, output=20.0)})
    dispatcher, _ = make_dispatcher(stream_then_hang, settings=priced)
    added = await db.add_task(NewTask("long"))
    assert added.task_id is not None
    running = asyncio.ensure_future(dispatcher.run_once())
    await metered.wait()
    await db.cancel(added.task_id, actor="human")
    task = await asyncio.wait_for(running, 30)  # a safety net: the heartbeat sees the cancel
    assert task is not None
    assert task.status is TaskStatus.CANCELED
    (run,) = await db.list_runs(task.id)
    assert (run.outcome, run.tokens_in, run.tokens_out) == ("canceled", 4000, 7)
    assert run.cost_usd == (4000 * 10.0 + 7 * 20.0) / 1_000_000


async def test_a_run_goes_to_a_free_account_with_the_environment_that_selects_it(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, clock: ManualClock, home: Path
) -> None:
    accounts = (Account("a", config_dir=home / "claude-a"), Account("b", api_key_env="VIGIL_TEST_KEY_B"))
    two = replace(
        settings,
        dispatch=replace(settings.dispatch, executor="claude"),
        claude=replace(settings.claude, accounts=accounts),
    )
    await limit_account(
        db, "claude:a", until=clock.now_ms() + 60_000, reason="limit", now_ms=clock.now_ms(), in_a_row=1
    )
    dispatcher, fake = make_dispatcher(succeed, settings=two)
    await db.add_task(NewTask("t"))
    task = await dispatcher.run_once()
    assert task is not None
    ((_, ctx),) = fake.calls
    assert ctx.account == "b"
    (run,) = await db.list_runs(task.id)
    assert (run.executor, run.account) == ("claude", "b")


def test_an_accounts_environment_selects_it_and_drops_the_other_credentials(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "ANTHROPIC_API_KEY": "operator", "CLAUDE_CODE_OAUTH_TOKEN": "tok", "CODEX_API_KEY": "x"}
    origin = {"KEY_B": "sk-b"}
    folder = account_env(base, "claude", Account("a", config_dir=tmp_path / "a"), origin)
    assert folder == {"PATH": "/bin", "CLAUDE_CONFIG_DIR": str(tmp_path / "a"), "CODEX_API_KEY": "x"}
    keyed = account_env(base, "claude", Account("b", api_key_env="KEY_B"), origin)
    assert (keyed["ANTHROPIC_API_KEY"], "CLAUDE_CODE_OAUTH_TOKEN" in keyed) == ("sk-b", False)
    codex = account_env(
        {"PATH": "/bin", "CODEX_API_KEY": "operator"}, "codex", Account("c", api_key_env="KEY_B"), origin
    )
    assert (codex["CODEX_API_KEY"], codex["OPENAI_API_KEY"]) == ("sk-b", "sk-b")
    home = account_env({"CODEX_API_KEY": "operator"}, "codex", Account("d", config_dir=tmp_path / "d"), origin)
    assert home == {"CODEX_HOME": str(tmp_path / "d")}
