"""The agent CLIs' shared end of a run (``dispatch.agents.ending``): ended early,
else over budget, else the CLI's own verdict; the stream is judged only then."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.agents.ending import AgentExecutor, Verdict
from dispatch.agents.pricing import TokenUsage
from dispatch.executors.child import ChildResult
from dispatch.meter import Meter, SpendLimit
from tests.dispatch.agent_support import agent_settings, make_ctx
from vigil.config import Price
from vigil.models import OutcomeKind

NOW_MS = 1_767_100_000_000
ANSWER = "Done: the tests pass."


class Judged:
    """A CLI's verdict, noting each moment it was asked at."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.asked: list[int] = []

    def __call__(self, now_ms: int) -> Verdict:
        self.asked.append(now_ms)
        return self.verdict


def executor(home: Path) -> AgentExecutor:
    return AgentExecutor(agent_settings(home), now_ms=lambda: NOW_MS)


def over_meter() -> Meter:
    meter = Meter({"m": Price(1000.0, 1000.0)}, SpendLimit(0.5, "the task's max_cost_usd"))
    meter.record("turns", "m", TokenUsage(input=1000))  # $1.00, past $0.50
    return meter


def test_a_cli_that_never_started_is_refused_without_reading_its_stream(home: Path) -> None:
    judge = Judged(Verdict(OutcomeKind.SUCCESS))
    result = ChildResult(None, False, "", spawn_error="cannot start 'claude': No such file or directory")

    outcome = executor(home).ended(result, make_ctx(agent_settings(home)), ANSWER, judge)

    assert outcome.kind is OutcomeKind.REFUSED
    assert outcome.detail == ANSWER
    assert judge.asked == []


def test_a_run_stopped_past_its_limit_is_over_budget_whatever_its_stream_says(home: Path) -> None:
    judge = Judged(Verdict(OutcomeKind.SUCCESS))
    ctx = replace(make_ctx(agent_settings(home)), meter=over_meter())

    outcome = executor(home).ended(ChildResult(-15, False, "", stopped=True), ctx, ANSWER, judge)

    assert outcome.kind is OutcomeKind.OVER_BUDGET
    assert (outcome.error or "").startswith("over budget: the run had spent $1.0000")
    assert outcome.exit_code == -15
    assert judge.asked == []


@pytest.mark.parametrize(
    ("verdict", "summary"),
    [
        (Verdict(OutcomeKind.SUCCESS), ANSWER),
        (Verdict(OutcomeKind.USAGE_LIMITED, "usage limit: resets 5pm", NOW_MS + 1000), "usage limit: resets 5pm"),
        (Verdict(OutcomeKind.FAILED), ANSWER),  # no error of its own: the answer says what happened
    ],
)
def test_a_run_that_ended_of_itself_is_what_its_cli_judges(home: Path, verdict: Verdict, summary: str) -> None:
    judge = Judged(verdict)
    ctx = make_ctx(agent_settings(home))

    outcome = executor(home).ended(ChildResult(0, False, ""), ctx, ANSWER, judge)

    assert (outcome.kind, outcome.error, outcome.retry_at) == (verdict.kind, verdict.error, verdict.retry_at)
    assert (outcome.summary, outcome.detail, outcome.exit_code) == (summary, ANSWER, 0)
    assert outcome.transcript_path == str(ctx.transcript_path)
    assert (outcome.cost_usd, outcome.tokens_in) == (0.0, 0)  # the executor adds what its CLI reported
    assert judge.asked == [NOW_MS]
