"""``vigil mcp --run N`` on its own, driven by the official ``mcp`` SDK's client over
stdio, as an agent CLI drives it: each tool, a call for another task, bad arguments,
a run that has ended. The server is the real ``vigil`` in a subprocess."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import VigilRunner
from vigil.models import Claim, NewTask, Outcome, OutcomeKind, TaskStatus
from vigil.store.sqlite import SqliteStore

SERVER_TIMEOUT_S = 60.0  # a safety net for a server that never answers, not a measurement


@asynccontextmanager
async def agent_client(home: Path, run_id: int) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "vigil", "--home", str(home), "mcp", "--run", str(run_id)]
    )
    async with Client(params, read_timeout_seconds=SERVER_TIMEOUT_S) as client:
        yield client


async def call(client: Client, tool: str, **arguments: object) -> tuple[bool, str]:
    """(whether the call failed, its text)."""
    result = await client.call_tool(tool, arguments)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    return bool(result.is_error), text


async def claimed(home: Path) -> tuple[SqliteStore, Claim, int]:
    """A store on the home's file, its first task claimed as a dispatcher would, and
    the id of a second task that is not the run's."""
    store = await SqliteStore.open(home / "data" / "vigil.db")
    mine = await store.add_task(NewTask("Fix the parser", description="It drops the last line."))
    other = await store.add_task(NewTask("Someone else's work"))
    assert mine.task_id is not None
    assert other.task_id is not None
    claim = await store.claim_next(worker="dispatcher-1", lease_ms=600_000)
    assert claim is not None
    assert claim.task.id == mine.task_id
    return store, claim, other.task_id


async def test_each_tool_acts_on_the_runs_own_task_as_the_agent(home: Path) -> None:
    store, claim, _ = await claimed(home)
    task_id = claim.task.id
    note = 'fixed `add()` in calc.py; see $HOME/notes "quoted"\nsecond line'
    try:
        async with agent_client(home, claim.run_id) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            shown = await call(client, "show")
            noted = await call(client, "note", text=note)
            added = await call(client, "add_followup", subject="Add a test for the last line", priority=3)
            closed = await call(client, "close", status="completed", summary="parser keeps the last line")
        task = await store.get_task(task_id)
        notes = await store.list_notes(task_id)
        (followup,) = [t for t in await store.list_tasks() if t.parent_id == task_id]
        events = await store.list_events(task_id)
    finally:
        await store.close()
    assert tools == {"show", "note", "close", "ask", "add_followup"}  # nothing that approves, pauses, resumes
    assert shown[0] is False
    assert f"task #{task_id}: Fix the parser" in shown[1]
    assert "It drops the last line." in shown[1]
    assert noted == (False, f"noted on task #{task_id}")
    assert [(n.author, n.text) for n in notes] == [("agent", note)]  # verbatim
    # never more urgent than its parent (priority 5): raised, and the agent is told
    assert added == (
        False,
        f"created task #{followup.id} (a follow-up of task #{task_id}); priority 5, not 3: a task an agent adds "
        f"is never more urgent than its parent or [limits] agent_priority_floor (its parent, task #{task_id}, "
        "has priority 5)",
    )
    assert (followup.source, followup.priority) == (f"task:{task_id}", 5)
    assert closed == (False, f"task #{task_id} closed as completed")
    assert (task.status, task.result_summary) == (TaskStatus.COMPLETED, "parser keeps the last line")
    assert [e.actor for e in events if e.kind == "status" and e.to_value == "completed"] == ["agent"]


async def test_a_call_for_another_task_is_refused_and_changes_nothing(home: Path) -> None:
    store, claim, other = await claimed(home)
    try:
        before = await store.get_task(other)
        async with agent_client(home, claim.run_id) as client:
            results = [
                await call(client, "close", status="completed", summary="done", task_id=other),
                await call(client, "note", text="mine now", task_id=other),
                await call(client, "add_followup", subject="child", task_id=other),
                await call(client, "show", task_id=other),
            ]
        after = await store.get_task(other)
        notes = await store.list_notes(other)
        children = [t for t in await store.list_tasks() if t.parent_id is not None]
    finally:
        await store.close()
    for failed, text in results:
        assert failed
        assert f"refused: task #{other} is not this run's task; this run may only change task #{claim.task.id}" in text
    assert after == before
    assert notes == []
    assert children == []


async def test_bad_arguments_are_a_clear_error_and_store_nothing(home: Path) -> None:
    store, claim, _ = await claimed(home)
    try:
        async with agent_client(home, claim.run_id) as client:
            results = {
                "unknown status": await call(client, "close", status="done-ish", summary="x"),
                "empty summary": await call(client, "close", status="completed", summary=" "),
                "pending needs a delay": await call(client, "close", status="pending", summary="later"),
                "bad delay": await call(client, "close", status="pending", summary="later", retry_in="soon"),
                "text not a string": await call(client, "note", text=5),
                "empty note": await call(client, "note", text="   "),
                "priority out of range": await call(client, "add_followup", subject="x", priority=12),
                "unknown skill": await call(client, "add_followup", subject="x", skills=["no-such-skill"]),
            }
        task = await store.get_task(claim.task.id)
        tasks = await store.list_tasks()
        notes = await store.list_notes(claim.task.id)
    finally:
        await store.close()
    expected = {
        "unknown status": "status must be one of completed, failed, blocked, pending, not 'done-ish'",
        "empty summary": "summary must not be empty",
        "pending needs a delay": "retry_in goes with status pending",
        "bad delay": "soon",
        "text not a string": "text",
        "empty note": "note text must not be empty",
        "priority out of range": "priority must be 1-9, not 12",
        "unknown skill": "unknown skill 'no-such-skill'",
    }
    for name, (failed, text) in results.items():
        assert failed, name
        assert expected[name] in text, (name, text)
        assert "refused" not in text, name  # a mistake, not a refusal
        assert "Traceback" not in text, name
    assert task.status is TaskStatus.ACTIVE
    assert len(tasks) == 2
    assert notes == []


async def test_once_the_run_has_ended_every_call_is_refused(home: Path) -> None:
    store, claim, _ = await claimed(home)
    try:
        async with agent_client(home, claim.run_id) as client:
            before = await call(client, "note", text="still running")
            outcome = Outcome(OutcomeKind.SUCCESS, summary="done")
            await store.record(claim, outcome, worker="dispatcher-1")
            after = await call(client, "note", text="one more thing")
        notes = await store.list_notes(claim.task.id)
    finally:
        await store.close()
    assert before == (False, f"noted on task #{claim.task.id}")
    assert after[0] is True
    assert f"refused: run #{claim.run_id} has ended; its agent can no longer change task #{claim.task.id}" in after[1]
    assert [n.text for n in notes] == ["still running"]


def test_a_run_that_is_not_open_is_one_line_and_exit_1(home: Path, vigil: VigilRunner) -> None:
    import asyncio

    result = vigil("mcp", "--run", "42")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == ["vigil: error: refused: run #42 does not exist"]
    assert result.stdout == ""  # stdout is the protocol's: nothing else goes there

    async def ended() -> int:
        store, claim, _ = await claimed(home)
        try:
            outcome = Outcome(OutcomeKind.SUCCESS, summary="done")
            await store.record(claim, outcome, worker="dispatcher-1")
        finally:
            await store.close()
        return claim.run_id

    run_id = asyncio.run(ended())
    result = vigil("mcp", "--run", str(run_id))
    assert result.returncode == 1
    assert "refused: run #1 has ended" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_tools_describe_their_arguments(home: Path) -> None:
    # what the model is shown: argument names and types, optional task_id
    import asyncio

    async def listed() -> dict[str, dict[str, object]]:
        store, claim, _ = await claimed(home)
        try:
            async with agent_client(home, claim.run_id) as client:
                return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
        finally:
            await store.close()

    schemas = asyncio.run(listed())
    close = json.dumps(schemas["close"])
    assert all(name in close for name in ("status", "summary", "retry_in", "task_id"))
    assert schemas["note"]["required"] == ["text"]
    assert schemas["add_followup"]["required"] == ["subject"]


async def test_ask_stores_the_question_and_the_run_ends_as_asked(home: Path) -> None:
    store, claim, other = await claimed(home)
    task_id = claim.task.id
    try:
        async with agent_client(home, claim.run_id) as client:
            asked = await call(client, "ask", question="Deploy to staging or to prod?", choices=["staging", "prod"])
            refused = await call(client, "ask", question="Whose?", task_id=other)
            empty = await call(client, "ask", question="  ")
            shown = await call(client, "show")
        task = await store.get_task(task_id)
        recorded = (
            await store.record(claim, Outcome(OutcomeKind.SUCCESS, session_id="s-1"), worker="dispatcher-1")
        ).task
        (run,) = await store.list_runs(task_id)
    finally:
        await store.close()
    assert asked[0] is False
    assert asked[1].startswith(f"asked on task #{task_id}; a person will answer. End your turn now")
    assert refused[0] is True
    assert f"refused: task #{other} is not this run's task" in refused[1]
    assert (empty[0], "a question must not be empty" in empty[1]) == (True, True)
    assert "your question: Deploy to staging or to prod?" in shown[1]
    assert "choices: staging | prod" in shown[1]
    assert (task.question, task.choices, task.asked_run) == (
        "Deploy to staging or to prod?",
        ("staging", "prod"),
        claim.run_id,
    )
    assert (recorded.status, recorded.attempt_count, run.outcome) == (TaskStatus.WAITING, 0, "asked")
