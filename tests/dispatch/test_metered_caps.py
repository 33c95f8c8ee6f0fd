"""Every cap metered or refused (issue 37, item 1): the price fallbacks (``[prices]``,
the shipped table, the model's family's price, the CLI's own figure), the final
spend held against the limit when the run ends, a cap refused when it is claimed
for a run it could not be metered against, and the daily budget that lets only
tasks a person made urgent run above it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.agents.claude.executor import claude_argv
from dispatch.agents.doctor import price_findings
from dispatch.agents.pricing import PRICES_AS_OF, TokenUsage, api_cost_usd, family_of, priced
from dispatch.alerts import AlertHook
from dispatch.executors import RunContext
from dispatch.guard import SENSOR_RECHECK_MS, Guard
from dispatch.meter import Meter, SpendLimit, meter_problem, priced_by
from tests.dispatch.conftest import MakeDispatcher, write_skill
from vigil.clock import ManualClock
from vigil.config import BudgetSettings, Price, Settings
from vigil.gate import read_gate
from vigil.models import NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store.sqlite import SqliteStore

MILLION = TokenUsage(input=1_000_000)


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-sonnet-5", "claude-sonnet"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet"),
        ("claude-3-5-haiku", "claude-haiku"),
        ("claude-opus-4-6[1m]", "claude-opus"),
        ("gpt-5.4-mini", "gpt-mini"),
        ("gpt-5.1-codex-mini", "gpt-codex-mini"),
        ("house-model-1", "house-model"),
    ],
)
def test_a_models_family_is_its_name_without_versions(model: str, family: str) -> None:
    assert family_of(model) == family


def test_a_price_comes_from_prices_then_the_table_then_the_family() -> None:
    own = {"claude-sonnet-5": Price(9.0, 9.0)}
    assert priced(own, "claude-sonnet-5") == priced(own, "claude-sonnet-5-20260101")
    found = priced(own, "claude-sonnet-5")
    assert found is not None
    assert (found.price.input, found.by) == (9.0, "[prices]")
    found = priced({}, "claude-sonnet-4-5")
    assert found is not None
    assert (found.price.input, found.by) == (3.0, f"the price table of {PRICES_AS_OF}")
    found = priced({}, "claude-sonnet-5")  # newer than the table: its family's price, said so
    assert found is not None
    assert (found.price.input, found.by) == (3.0, "the claude-sonnet family's price")
    found = priced({}, "gpt-5.9-pro")  # no gpt-pro family: the gpt one
    assert found is not None
    assert found.by == "the gpt family's price"
    assert priced({}, "house-model-1") is None
    assert priced({}, None) is None


def test_the_api_cost_of_an_unpriced_model_is_its_familys_not_zero() -> None:
    # the run: 200,000 input tokens of claude-sonnet-5 were priced $0.00
    assert api_cost_usd({}, "claude-sonnet-5", TokenUsage(input=200_000)) == pytest.approx(0.6)
    assert api_cost_usd({}, "house-model-1", MILLION) == 0.0


def test_a_cap_can_be_metered_unless_the_model_has_no_price_and_the_cli_no_figure() -> None:
    assert meter_problem("claude", "house-model-1", {}) is None  # Claude Code reports its own cost
    assert meter_problem("codex", "gpt-5.4", {}) is None
    assert meter_problem("codex", "gpt-7", {}) is None  # the gpt family's price
    assert meter_problem("codex", "house-model-1", {"house-model-1": Price(1.0, 2.0)}) is None
    assert meter_problem("command", None, {}) is None  # starts no agent CLI: spends nothing metered
    problem = meter_problem("codex", "house-model-1", {})
    assert problem is not None
    assert "model 'house-model-1' has no price (add [prices.'house-model-1']" in problem
    problem = meter_problem("codex", None, {})
    assert problem is not None
    assert "codex's model is not named" in problem


def test_a_run_says_what_priced_it() -> None:
    figure = "Claude Code's total_cost_usd"
    assert priced_by({}, ["claude-sonnet-5", "claude-haiku-4-5"], figure) == (
        "Claude Code's total_cost_usd; tokens: claude-haiku-4-5 at the price table of "
        f"{PRICES_AS_OF}, claude-sonnet-5 at the claude-sonnet family's price"
    )
    assert priced_by({}, ["house-model-1"]) == "tokens: house-model-1 unpriced"
    assert priced_by({}, [None]) is None


def test_the_meter_prices_an_unpriced_model_by_its_family() -> None:
    meter = Meter({}, SpendLimit(0.5, "the task's max_cost_usd of $0.50"))
    meter.record("msg_1", "claude-sonnet-5", TokenUsage(input=100_000))
    assert meter.cost_usd == pytest.approx(0.3)
    assert not meter.over
    meter.record("msg_2", "claude-sonnet-5", TokenUsage(input=100_000))
    assert meter.over
    assert meter.unpriced("house-model-1")
    assert not meter.unpriced("claude-sonnet-5")


def test_the_final_spend_past_the_limit_is_over_budget_whatever_the_run_said() -> None:
    meter = Meter({}, SpendLimit(0.5, "the task's max_cost_usd of $0.50"))
    done = Outcome(OutcomeKind.SUCCESS, summary="Done.", cost_usd=0.75)
    over = meter.reconcile(done)
    assert over.kind is OutcomeKind.OVER_BUDGET
    assert over.error == (
        "over budget: the run spent $0.7500 in all, past the task's max_cost_usd of $0.50 "
        "(the overrun showed when the run ended)"
    )
    assert over.cost_usd == 0.75  # what it spent is kept
    assert meter.reconcile(replace(done, cost_usd=0.5)) == replace(done, cost_usd=0.5)  # at the limit: within it
    canceled = Outcome(OutcomeKind.CANCELED, cost_usd=0.9)
    assert meter.reconcile(canceled) is canceled  # a person's cancel decided it
    assert Meter({}, None).reconcile(done) is done  # no limit, nothing to hold


def test_claude_code_is_given_the_smaller_of_its_own_budget_and_the_runs_limit(settings: Settings) -> None:
    cli = replace(settings.claude, max_budget_usd=2.0)
    argv = claude_argv(cli, "house-model-1", settings.home, spend_limit_usd=0.05)
    assert argv[argv.index("--max-budget-usd") + 1] == "0.05"
    argv = claude_argv(cli, "house-model-1", settings.home, spend_limit_usd=-0.3)  # already spent: stops at once
    assert argv[argv.index("--max-budget-usd") + 1] == "0.0001"
    argv = claude_argv(cli, None, settings.home)
    assert argv[argv.index("--max-budget-usd") + 1] == "2"


def _codex(settings: Settings, model: str | None, **budget: float) -> Settings:
    return replace(
        settings,
        dispatch=replace(settings.dispatch, executor="codex"),
        codex=replace(settings.codex, model=model),
        budget=BudgetSettings(**budget),  # type: ignore[arg-type]
    )


def never_run(task: Task, ctx: RunContext) -> Outcome:
    raise AssertionError("a run whose cap cannot be metered must not start")


async def test_a_task_whose_cap_cannot_be_metered_is_refused_when_claimed(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings
) -> None:
    dispatcher, fake = make_dispatcher(never_run, settings=_codex(settings, "house-model-1"))
    await db.add_task(NewTask("capped", max_cost_usd=0.2))
    task = await dispatcher.run_once()
    assert task is not None
    assert task.status is TaskStatus.FAILED
    assert fake.calls == []
    (run,) = await db.list_runs(task.id)
    assert run.outcome == "failed"
    assert run.error is not None
    assert run.error.startswith(
        "refused: the task's max_cost_usd of $0.20 cannot be metered: model 'house-model-1' has no price"
    )


async def test_a_daily_budget_that_cannot_be_metered_refuses_and_gates_not_fails(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, clock: ManualClock
) -> None:
    refusing = _codex(settings, "house-model-1", daily_usd=5.0)
    hook = AlertHook(refusing.alerts, refusing.home)
    dispatcher, fake = make_dispatcher(never_run, settings=refusing, guard=Guard(db, refusing, clock, hook))
    added = await db.add_task(NewTask("routine"))
    assert added.task_id is not None
    task = await dispatcher.run_once()
    assert task is not None
    assert task.status is TaskStatus.PENDING
    assert fake.calls == []
    (run,) = await db.list_runs(task.id)
    assert run.outcome == "refused"
    assert run.error is not None
    assert "the daily budget of $5.00" in run.error
    assert "cannot be metered" in run.error
    assert (await read_gate(db)).reason.startswith("the agent CLI refused to start (refused: the daily budget")
    await hook.drain()


async def test_only_tasks_a_person_made_urgent_run_free_of_the_daily_budget(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings
) -> None:
    budgeted = replace(settings, budget=BudgetSettings(daily_usd=1.0, urgent_priority=1))
    dispatcher, fake = make_dispatcher(lambda task, ctx: Outcome(OutcomeKind.SUCCESS), settings=budgeted)
    person = await db.add_task(NewTask("the person's urgent task", priority=1))
    assert person.task_id is not None
    await dispatcher.run_once()
    agents = await db.add_task(
        NewTask("the agent's urgent follow-up", priority=1, parent_id=person.task_id, source=f"task:{person.task_id}"),
        actor="agent",
    )
    sensors = await db.add_task(NewTask("a sensor's urgent task", priority=1, source="sensor:feeds"), actor="sensor")
    raised = await db.add_task(NewTask("raised by a person", priority=4, source="sensor:feeds"), actor="sensor")
    assert raised.task_id is not None
    await db.set_priority(raised.task_id, 1, actor="human via telegram @ann (1)")
    for _ in range(3):
        await dispatcher.run_once()
    limits = {task.subject: ctx.meter.limit for task, ctx in fake.calls}
    assert limits["the person's urgent task"] is None
    assert limits["raised by a person"] is None
    for subject in ("the agent's urgent follow-up", "a sensor's urgent task"):
        limit = limits[subject]
        assert limit is not None, subject
        assert limit.daily, subject
    assert agents.task_id is not None
    assert sensors.task_id is not None


def test_doctor_names_every_model_in_use_that_has_no_price(settings: Settings, home: Path) -> None:
    write_skill(home, "house", "description: House model.\nmodel: house-model-1")
    claude = replace(
        settings,
        dispatch=replace(settings.dispatch, executor="claude"),
        claude=replace(settings.claude, model="claude-sonnet-5"),
    )
    found = price_findings(claude, {}, recent=["claude-sonnet-4-5", "gpt-7"])
    assert [(f.level, f.detail) for f in found] == [
        ("ok", "claude: each run is priced by Claude Code's own total_cost_usd"),
        (
            "warn",
            "model 'claude-sonnet-5' ([executors.claude] model) has no price of its own: its tokens are priced at "
            "the claude-sonnet family's price; add [prices.'claude-sonnet-5'] (USD per million tokens)",
        ),
        (
            "warn",
            "model 'house-model-1' (skill house) has no price: its tokens count $0, and a cap on its runs is held "
            "only by Claude Code's own total_cost_usd (refused under Codex); add [prices.'house-model-1'] "
            "(USD per million tokens)",
        ),
        (
            "warn",
            "model 'gpt-7' (seen in recent runs) has no price of its own: its tokens are priced at the gpt "
            "family's price; add [prices.'gpt-7'] (USD per million tokens)",
        ),
    ]
    priced_claude = replace(claude, prices={"claude-sonnet-5": Price(3.0, 15.0), "house-model-1": Price(1.0, 1.0)})
    assert [f.level for f in price_findings(priced_claude, {}, recent=["claude-sonnet-4-5"])] == ["ok"]


def test_doctor_fails_a_codex_model_of_no_price_under_a_daily_budget(settings: Settings) -> None:
    (found,) = price_findings(_codex(settings, "house-model-1", daily_usd=5.0), {})
    assert found.level == "fail"
    assert found.detail.endswith("a cap on them is refused; under the daily budget every task is refused")
    (found,) = price_findings(_codex(settings, "house-model-1"), {})
    assert found.level == "warn"


async def test_an_agents_urgent_follow_up_is_held_to_its_sensors_cap(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, clock: ManualClock
) -> None:
    capped = replace(settings, budget=BudgetSettings(urgent_priority=1, warn_at=(), per_sensor={"feeds": 1.0}))
    hook = AlertHook(capped.alerts, capped.home)
    dispatcher_of, _ = make_dispatcher(spend, settings=capped, guard=Guard(db, capped, clock, hook))
    root = await db.add_task(NewTask("feed entry", source="sensor:feeds", priority=1), actor="sensor:feeds")
    assert root.task_id is not None
    assert await dispatcher_of.run_once() is not None  # $1.50: the sensor is over its cap
    follow_up = await db.add_task(
        NewTask("urgent follow-up", priority=1, parent_id=root.task_id, source=f"task:{root.task_id}"), actor="agent"
    )
    assert follow_up.task_id is not None
    held = await dispatcher_of.run_once()
    assert held is not None
    assert (held.id, held.status, held.attempt_count) == (follow_up.task_id, TaskStatus.PENDING, 0)
    assert await db.list_runs(follow_up.task_id) == []
    await db.set_priority(follow_up.task_id, 2, actor="human")
    await db.set_priority(follow_up.task_id, 1, actor="human")  # a person made it urgent: it runs
    clock.advance(SENSOR_RECHECK_MS)
    ran = await dispatcher_of.run_once()
    assert ran is not None
    assert (ran.id, ran.status) == (follow_up.task_id, TaskStatus.COMPLETED)
    await hook.drain()


def spend(task: Task, ctx: RunContext) -> Outcome:
    return Outcome(OutcomeKind.SUCCESS, cost_usd=1.5)
