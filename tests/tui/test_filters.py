"""The filter bar's language: parsing, and what the store keeps for it (the filter
is answered by the store, over every task)."""

from __future__ import annotations

import pytest

from tui.filters import FilterError, parse_filter
from vigil.clock import ManualClock
from vigil.models import DedupScope, NewTask, Task, TaskStatus
from vigil.store.sqlite import SqliteStore
from vigil.task_query import Sort

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
async def test_filter_matches(text: str, keeps: bool, store: SqliteStore, clock: ManualClock) -> None:
    await store._db.write(lambda c: c.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('tasks', 411)"))
    new = NewTask(BASE.subject, priority=BASE.priority, skills=BASE.skills, source=BASE.source)
    assert (await store.add_task(new)).task_id == 412
    window = await store.task_window(parse_filter(text).query())
    assert [t.id for t in window.tasks] == ([412] if keeps else [])


@pytest.mark.parametrize("text", ["status:bogus", "pri<x", "pri<", "id:abc"])
def test_bad_qualifier_values_are_refused_clearly(text: str) -> None:
    with pytest.raises(FilterError):
        parse_filter(text)


def test_states_and_qualifiers_become_the_query() -> None:
    flt = parse_filter("deploy status:failed,approval source:sensor: skill:web,git pri<=3 id:#4,5,4 http://x")
    query = flt.query(Sort.SUBJECT, descending=True)
    assert [s.name for s in query.states] == ["approval", "failed"]  # in the state table's order
    assert query.words == ("deploy", "http://x")
    assert (query.sources, query.skills, query.priority, query.ids) == (("sensor:",), ("web", "git"), ("<=", 3), (4, 5))
    assert (query.sort, query.descending) == (Sort.SUBJECT, True)
    assert parse_filter("priority:2").priority == ("=", 2)


def test_a_state_click_toggles_the_status_qualifier() -> None:
    flt = parse_filter("deploy status:pending")
    failed = flt.with_state("failed")
    assert [s.name for s in failed.states] == ["failed"]
    assert failed.words == ("deploy",)
    assert failed.with_state("failed").states == ()
    assert [s.name for s in flt.with_state("approval").states] == ["approval"]
