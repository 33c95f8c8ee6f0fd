"""The codex executor against a fake ``codex exec --json``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from dispatch.executors.codex import CodexExecutor, codex_argv
from tests.dispatch.agent_support import CODEX_FAKE, agent_settings, fake_argv, make_ctx, make_task, recorded
from vigil.config import Settings
from vigil.models import OutcomeKind


def codex_settings(home: Path, scenario: str, *options: str, **codex: object) -> Settings:
    return agent_settings(home, executors={"codex": {"command": fake_argv(CODEX_FAKE, scenario, *options), **codex}})


async def test_success_over_two_turns_sums_usage_and_prices_it(home: Path) -> None:
    record = home / "r.json"
    settings = codex_settings(home, "success", "--record", str(record))
    ctx = make_ctx(settings, prompt="Summarise the feeds.", model="gpt-5-codex")

    outcome = await CodexExecutor(settings).run(make_task(), ctx)

    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.summary == "Final: all three feeds summarised."  # the last agent_message
    # input_tokens include the cached ones, which are counted apart
    assert outcome.tokens_in == (37067 - 26880) + (1000 - 500)
    assert outcome.cache_read_tokens == 26880 + 500
    assert outcome.tokens_out == 850 + 150
    assert outcome.cache_write_tokens == 0
    expected = ((37067 - 26880 + 500) * 1.25 + 1000 * 10.0 + (26880 + 500) * 0.125) / 1e6
    assert outcome.api_cost_usd == pytest.approx(expected)
    assert outcome.cost_usd == pytest.approx(expected)
    assert outcome.model == "gpt-5-codex"
    assert outcome.session_id == "01a03463"
    seen = recorded(record)
    assert seen["stdin"] == "Summarise the feeds."
    assert seen["argv"][4:] == ["exec", "--json", "--model", "gpt-5-codex"]
    lines = ctx.transcript_path.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "vigil.prompt"
    assert sum(1 for line in lines if '"turn.completed"' in line) == 2


async def test_unpriced_model_costs_zero_and_still_succeeds(home: Path) -> None:
    settings = codex_settings(home, "success")
    outcome = await CodexExecutor(settings).run(make_task(), make_ctx(settings, model="some-new-model"))
    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.cost_usd == 0
    assert outcome.tokens_out == 1000


async def test_turn_failed_is_transient_with_the_message(home: Path) -> None:
    settings = codex_settings(home, "turn_failed")
    outcome = await CodexExecutor(settings).run(make_task(), make_ctx(settings))
    assert outcome.kind is OutcomeKind.TRANSIENT
    assert outcome.error == "stream disconnected before completion"
    assert outcome.exit_code == 1


async def test_usage_limit_is_read_with_its_reset_time(home: Path) -> None:
    settings = codex_settings(home, "usage_limit")
    outcome = await CodexExecutor(settings).run(make_task(), make_ctx(settings))
    assert outcome.kind is OutcomeKind.USAGE_LIMITED
    assert outcome.retry_at == int(datetime(2026, 4, 11, 14, 32).timestamp() * 1000)


async def test_noise_lines_are_tolerated(home: Path) -> None:
    settings = codex_settings(home, "noise")
    outcome = await CodexExecutor(settings).run(make_task(), make_ctx(settings))
    assert outcome.kind is OutcomeKind.SUCCESS


async def test_a_crash_without_events_is_transient(home: Path) -> None:
    settings = codex_settings(home, "exit", "--exit", "3")
    outcome = await CodexExecutor(settings).run(make_task(), make_ctx(settings))
    assert outcome.kind is OutcomeKind.TRANSIENT
    assert outcome.exit_code == 3


def test_argv_has_exec_json_model_then_extra_args(home: Path) -> None:
    settings = agent_settings(home, executors={"codex": {"command": ["codex"], "extra_args": ["--full-auto"]}})
    assert codex_argv(settings.codex, "o4") == ["codex", "exec", "--json", "--model", "o4", "--full-auto"]
    assert codex_argv(settings.codex, None) == ["codex", "exec", "--json", "--full-auto"]
