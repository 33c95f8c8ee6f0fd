"""The filter bar's language (pure parsing and matching)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tui.filters import FilterError, parse_filter
from vigil.models import DedupScope, Task, TaskStatus

BASE = Task(
    id=412, subject="Deploy the Web site", description="", skills=("web", "git"), priority=2,
    status=TaskStatus.PENDING, source="sensor:inbox", source_key=None, dedup=DedupScope.OPEN,
    parent_id=None, scheduled_for=0, created_at=0, updated_at=0, started_at=None, completed_at=None,
    attempt_count=0, max_retries=3, cost_usd=0.0, api_cost_usd=0.0, tokens_in=0, tokens_out=0,
    result_summary=None, result_detail=None, model=None, executor=None, claimed_by=None,
    lease_until=None, cancel_requested=False, waiting_on=0,
)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "keeps"),
    [
        ("", True),
        ("deploy", True),
        ("DEPLOY site", True),
        ("deploy missing", False),
        ("status:pending", True),
        ("status:failed,canceled", False),
        ("is:pending", True),
        ("source:sensor:inbox", True),
        ("source:sensor", True),
        ("source:human", False),
        ("skill:web", True),
        ("skill:web,git", True),
        ("skill:python", False),
        ("pri<3", True),
        ("pri<2", False),
        ("pri<=2", True),
        ("pri>1", True),
        ("priority:2", True),
        ("pri=3", False),
        ("id:412", True),
        ("id:#411,#412", True),
        ("id:7", False),
        ("http://example.com", False),
        ("status:pending skill:web pri<3 deploy", True),
    ],
)
def test_filter_matches(text: str, keeps: bool) -> None:
    assert parse_filter(text).matches(BASE) is keeps


@pytest.mark.parametrize("text", ["status:bogus", "pri<x", "pri<", "id:abc"])
def test_bad_qualifier_values_are_refused_clearly(text: str) -> None:
    with pytest.raises(FilterError):
        parse_filter(text)


def test_finished_statuses_need_history() -> None:
    assert parse_filter("status:failed").wants_finished
    assert not parse_filter("status:pending,blocked").wants_finished


def test_status_click_toggles_the_status_qualifier() -> None:
    flt = parse_filter("deploy status:pending")
    failed = flt.with_status(TaskStatus.FAILED)
    assert failed.statuses == {TaskStatus.FAILED}
    assert failed.words == ("deploy",)
    assert failed.with_status(TaskStatus.FAILED).statuses == frozenset()
    assert parse_filter("x").matches(replace(BASE, subject="no")) is False
