"""Messages from the agent that the MCP SDK would drop unanswered (issue 38's fault
hunt): each gets an answer and a line in ``logs/mcp.log``, and the server goes on
answering. Texts past their caps are cut with a marker. The real ``vigil mcp`` runs
in a subprocess; the first test writes JSON-RPC lines to its stdin as an agent CLI
would, since the SDK's client cannot send them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

from tests.cli.test_mcp_server import agent_client, call, claimed
from vigil.caps import DESCRIPTION_CHARS, NOTE_CHARS, SUBJECT_CHARS, SUMMARY_CHARS
from vigil.mcp_transport import MAX_LINE_BYTES
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
DEEP = "[" * 100_000 + "]" * 100_000
NOTE_CALL = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "note", "arguments": %s}}'
HOSTILE = {
    "a lone surrogate": (NOTE_CALL % (2, '{"text": "a\\ud800b"}'), "lone surrogate"),
    "nesting 100,000 deep": (NOTE_CALL % (2, '{"text": ' + DEEP + "}"), "nested deeper than 100 levels"),
    "nesting in another argument": (NOTE_CALL % (2, '{"text": "a", "x": ' + DEEP + "}"), "nested deeper"),
    "a line past the cap": (NOTE_CALL % (2, json.dumps({"text": "x" * MAX_LINE_BYTES})), "longer than 4 MiB"),
    "not JSON": ('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {nope', "not JSON"),
}


async def _open_run(home: Path) -> int:
    store = await SqliteStore.open(home / "data" / "vigil.db")
    try:
        await store.add_task(NewTask("Fix the parser"))
        claim = await store.claim_next(worker="dispatcher-1", lease_ms=600_000)
        assert claim is not None
        return claim.run_id
    finally:
        await store.close()


def _send(stdin: IO[str], line: str | dict[str, Any]) -> None:
    stdin.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    stdin.flush()


def _reply(stdout: IO[str]) -> dict[str, Any]:
    line = stdout.readline()  # the test's timeout bounds a server that never answers
    assert line, "the server hung up"
    reply: dict[str, Any] = json.loads(line)
    return reply


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", HOSTILE)
async def test_a_tool_call_the_sdk_cannot_read_is_answered_and_logged(home: Path, kind: str) -> None:
    line, reason = HOSTILE[kind]
    run_id = await _open_run(home)
    server = subprocess.Popen(
        [sys.executable, "-m", "vigil", "--home", str(home), "mcp", "--run", str(run_id)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None
    assert server.stdout is not None
    try:
        _send(server.stdin, INITIALIZE)
        assert _reply(server.stdout)["id"] == 1
        _send(server.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(server.stdin, line)
        refused = _reply(server.stdout)
        _send(server.stdin, NOTE_CALL % (3, '{"text": "still here"}'))
        after = _reply(server.stdout)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        server.stdout.close()
        assert server.stderr is not None
        server.stderr.close()
    assert refused["id"] == 2
    assert refused["result"]["isError"] is True
    (content,) = refused["result"]["content"]
    assert content["text"].startswith("refused: ")
    assert reason in content["text"]
    assert after["id"] == 3
    assert after["result"]["content"] == [{"type": "text", "text": "noted on task #1"}]
    log = (home / "logs" / "mcp.log").read_text(encoding="utf-8")
    assert f"WARNING run {run_id}: refused a message (tools/call, id 2): " in log
    assert reason in log
    assert f"INFO run {run_id}: note: noted on task #1" in log


@pytest.mark.timeout(120)
async def test_what_the_agent_sends_past_a_cap_is_cut_with_a_marker(home: Path) -> None:
    """Before, a 100 MB note was stored whole; now each text is cut at its cap
    (vigil.caps) and says so, and the run goes on."""
    store, claim, _ = await claimed(home)
    long_note = "n" * (NOTE_CHARS + 5_000)
    try:
        async with agent_client(home, claim.run_id) as client:
            noted = await call(client, "note", text=long_note)
            added = await call(client, "add_followup", subject="s" * 10_000, description="d" * 200_000)
            closed = await call(client, "close", status="failed", summary="f" * 50_000)
        (note,) = await store.list_notes(claim.task.id)
        (followup,) = [t for t in await store.list_tasks() if t.parent_id == claim.task.id]
        task = await store.get_task(claim.task.id)
    finally:
        await store.close()
    assert (noted[0], added[0], closed[0]) == (False, False, False)
    assert len(note.text) == NOTE_CHARS
    assert note.text.startswith("nnnn")
    assert note.text.endswith("… [cut by Vigil: 5,000 more characters]")
    assert len(followup.subject) == SUBJECT_CHARS
    assert followup.subject.endswith("[cut by Vigil: 9,500 more characters]")
    assert len(followup.description) == DESCRIPTION_CHARS
    assert task.result_summary is not None
    assert len(task.result_summary) == SUMMARY_CHARS
    assert task.result_summary.endswith("[cut by Vigil: 46,000 more characters]")
