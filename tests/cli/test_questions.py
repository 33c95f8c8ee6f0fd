"""``vigil task ask / answer / unblock``: a question stored from inside a run, a
person's answer (text or a choice) and unblock, and one-line refusals for tasks in
another state or for the agent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from vigil.models import Claim, NewTask, Outcome, OutcomeKind, TaskStatus
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow


def _waiting_task(home: Path) -> int:
    """A task claimed as a dispatcher would: running, its run open."""

    async def make() -> int:
        store = await SqliteStore.open(home / "data" / "vigil.db")
        try:
            await store.add_task(NewTask("Deploy the release"))
            claim = await store.claim_next(worker="w", lease_ms=600_000)
            assert claim is not None
            return claim.task.id
        finally:
            await store.close()

    return asyncio.run(make())


def _record(home: Path, task_id: int) -> None:
    """The dispatcher records the running task's run as a success."""

    async def record() -> None:
        store = await SqliteStore.open(home / "data" / "vigil.db")
        try:
            (task,) = [t for t in await store.active_tasks() if t.id == task_id]
            runs = await store.list_runs(task_id)
            claim = Claim(task=task, run_id=runs[-1].id, attempt=runs[-1].attempt)
            await store.record(claim, Outcome(OutcomeKind.SUCCESS), worker="w")
        finally:
            await store.close()

    asyncio.run(record())


def test_a_person_answers_with_a_choice_and_the_task_is_due_again(home: Path, vigil: VigilRunner) -> None:
    task_id = _waiting_task(home)
    agent_env = {"VIGIL_TASK_ID": str(task_id)}
    asked = vigil(
        "task",
        "ask",
        str(task_id),
        "Deploy to staging or to prod?",
        "--choice",
        "staging",
        "--choice",
        "prod",
        env=agent_env,
    )
    assert asked.returncode == 0, asked.stderr
    _record(home, task_id)
    listed = vigil("task", "list")
    status = vigil("status")
    as_json = json.loads(vigil("status", "--json").stdout)
    answered = vigil("task", "answer", str(task_id), "--choice", "2")
    shown = json.loads(vigil("task", "show", str(task_id), "--json").stdout)
    assert "waiting" in listed.stdout
    assert "(asks: Deploy to staging or to prod?) Deploy the release" in listed.stdout
    assert f"#{task_id} Deploy the release: Deploy to staging or to prod? [staging | prod]" in status.stdout
    assert as_json["queue"]["waiting"] == 1
    assert as_json["questions"] == [
        {
            "id": task_id,
            "subject": "Deploy the release",
            "question": "Deploy to staging or to prod?",
            "choices": ["staging", "prod"],
        }
    ]
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.strip() == f"task #{task_id} answered (prod); pending, due now"
    task = shown
    assert (task["status"], task["answer"], task["attempt_count"]) == ("pending", "prod", 0)


def test_answer_and_unblock_refuse_tasks_in_other_states_in_one_line(home: Path, vigil_in_process: VigilRunner) -> None:
    added = vigil_in_process("task", "add", "Pending work", "--json")
    task_id = json.loads(added.stdout)["id"]
    cases = [
        (("task", "answer", str(task_id), "yes"), f"task #{task_id} is pending, cannot answer it"),
        (("task", "unblock", str(task_id)), f"task #{task_id} is pending, cannot unblock it"),
        (("task", "answer", str(task_id)), "give the answer as TEXT or --choice N"),
        (("task", "answer", "999", "yes"), "task #999 not found"),
        (("task", "ask", str(task_id), "why?"), f"task #{task_id} is pending, cannot ask a question"),
    ]
    for args, message in cases:
        proc = vigil_in_process(*args)
        assert proc.returncode != 0, args
        assert proc.stderr.count("\n") == 1, proc.stderr  # one line, no traceback
        assert message in proc.stderr, (args, proc.stderr)


def test_the_agent_cannot_answer_or_unblock(home: Path, vigil_in_process: VigilRunner) -> None:
    task_id = _waiting_task(home)
    for args in (("task", "answer", str(task_id), "prod"), ("task", "unblock", str(task_id))):
        proc = vigil_in_process(*args, env={"VIGIL_TASK_ID": str(task_id)})
        assert proc.returncode != 0
        assert "only a person can" in proc.stderr
        assert proc.stderr.count("\n") == 1


def test_unblock_puts_a_blocked_task_back_with_its_note(home: Path, vigil_in_process: VigilRunner) -> None:
    added = vigil_in_process("task", "add", "Needs the VPN", "--json")
    task_id = json.loads(added.stdout)["id"]
    closed = vigil_in_process("task", "close", str(task_id), "--status", "blocked", "--summary", "no VPN")
    assert closed.returncode == 0, closed.stderr
    unblocked = vigil_in_process("task", "unblock", str(task_id), "the VPN is up again")
    assert unblocked.returncode == 0, unblocked.stderr
    assert unblocked.stdout.strip() == f"task #{task_id} unblocked; pending, due now"
    shown = json.loads(vigil_in_process("task", "show", str(task_id), "--json").stdout)
    task = shown
    assert task["status"] == str(TaskStatus.PENDING)
    notes = shown["notes"]
    assert [(n["author"], n["text"]) for n in notes] == [("human", "the VPN is up again")]
