"""Which attempt continues an earlier run's agent session, and with what message."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.resumption import resume_after_failure, resume_for
from dispatch.skills import Skill
from tests.dispatch.agent_support import make_task
from vigil.config import AgentCliSettings
from vigil.models import ApprovalState, Note, Run, Task

WORKSPACE = Path("/srv/work/7")


def run(attempt: int, outcome: str, *, session: str | None = "sess-1", executor: str = "claude") -> Run:
    return Run(
        id=100 + attempt, task_id=7, attempt=attempt, started_at=1, finished_at=2, outcome=outcome, error="boom",
        exit_code=1, cost_usd=0, api_cost_usd=0, tokens_in=0, tokens_out=0, cache_read_tokens=0,
        cache_write_tokens=0, model=None, session_id=session, transcript_path=None, executor=executor,
        claimed_by=None, pid=None, pgid=None, proc_start=None, workspace=str(WORKSPACE),
    )  # fmt: skip


ANSWERED = make_task(id=7, question="staging or prod?", answer="staging", asked_run=101)


def test_the_attempt_after_an_answer_resumes_the_asking_session_with_the_answer() -> None:
    resume = resume_for(ANSWERED, [run(1, "asked")], "claude", WORKSPACE, after_failure=False)
    assert resume is not None
    assert (resume.session_id, resume.from_run) == ("sess-1", 101)
    assert "staging or prod?" in resume.message
    assert "\nstaging\n" in resume.message


@pytest.mark.parametrize(
    ("runs", "executor", "workspace"),
    [
        pytest.param([run(1, "asked", session=None)], "claude", WORKSPACE, id="no session recorded"),
        pytest.param([run(1, "asked", executor="codex")], "claude", WORKSPACE, id="another executor"),
        pytest.param([run(1, "asked")], "claude", Path("/elsewhere"), id="another workspace"),
        pytest.param([run(1, "asked"), run(2, "failed")], "claude", WORKSPACE, id="not the last run"),
        pytest.param([], "claude", WORKSPACE, id="no earlier run"),
    ],
)
def test_a_session_that_cannot_be_continued_gives_a_fresh_run(runs: list[Run], executor: str, workspace: Path) -> None:
    assert resume_for(ANSWERED, runs, executor, workspace, after_failure=True) is None


def test_an_unanswered_question_is_not_resumed() -> None:
    waiting = replace(ANSWERED, answer=None)
    assert resume_for(waiting, [run(1, "asked")], "claude", WORKSPACE, after_failure=True) is None


@pytest.mark.parametrize("outcome", ["transient", "timeout", "interrupted"])
def test_an_early_end_resumes_only_when_allowed(outcome: str) -> None:
    task = make_task(id=7)
    allowed = resume_for(task, [run(1, outcome)], "claude", WORKSPACE, after_failure=True)
    assert allowed is not None
    assert f"ended early: {outcome}" in allowed.message
    assert resume_for(task, [run(1, outcome)], "claude", WORKSPACE, after_failure=False) is None


def test_failed_and_successful_runs_are_never_resumed() -> None:
    task = make_task(id=7)
    for outcome in ("failed", "success", "usage_limited"):
        assert resume_for(task, [run(1, outcome)], "claude", WORKSPACE, after_failure=True) is None


SENT_BACK = make_task(id=7, review=ApprovalState.REJECTED)


def note(at: int, author: str, text: str) -> Note:
    return Note(id=at, task_id=7, at=at, author=author, text=text)


def test_a_result_sent_back_resumes_the_session_that_made_it_with_what_was_said_since() -> None:
    notes = [
        note(1, "agent", "looking at the parser"),  # during the run: its own conversation has it
        note(2, "agent", "done: fixed"),  # the agent's, at the run's last moment: not news to it
        note(3, "sensor:github", "A review on pull request octo/demo#12 requested changes.\n> Handle None."),
        note(4, "human", "review: and add a test"),
    ]
    resume = resume_for(SENT_BACK, [run(1, "success")], "claude", WORKSPACE, after_failure=False, notes=notes)
    assert resume is not None
    assert (resume.session_id, resume.from_run) == ("sess-1", 101)
    assert "was sent back to you" in resume.message
    review = "From sensor:github:\nA review on pull request octo/demo#12 requested changes.\n> Handle None."
    assert review in resume.message
    assert "From human:\nreview: and add a test" in resume.message
    assert "looking at the parser" not in resume.message
    assert "done: fixed" not in resume.message


@pytest.mark.parametrize(
    ("task", "outcome", "notes"),
    [
        pytest.param(SENT_BACK, "success", [], id="nothing said since"),
        pytest.param(SENT_BACK, "success", [note(1, "human", "old")], id="said before the run ended"),
        pytest.param(make_task(id=7), "success", [note(3, "human", "hi")], id="not sent back"),
        pytest.param(SENT_BACK, "failed", [note(3, "human", "hi")], id="the last run failed"),
    ],
)
def test_a_task_not_sent_back_after_a_success_is_not_resumed(task: Task, outcome: str, notes: list[Note]) -> None:
    assert resume_for(task, [run(1, outcome)], "claude", WORKSPACE, after_failure=False, notes=notes) is None


def test_a_skill_wins_over_the_executors_setting() -> None:
    cli = AgentCliSettings(command=("claude",), resume_after_failure=True)
    skill = Skill(name="s", description="d", body="", folder=Path("/s"), resume_after_failure=False)
    plain = Skill(name="p", description="d", body="", folder=Path("/p"))
    assert resume_after_failure(cli, []) is True
    assert resume_after_failure(cli, [plain, skill]) is False
    assert resume_after_failure(replace(cli, resume_after_failure=False), [plain]) is False
    assert resume_after_failure(None, []) is False  # an executor without sessions
