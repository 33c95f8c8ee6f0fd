"""Messages from the agent that the MCP SDK would drop unanswered (issue 38's fault
hunt): each gets an answer and a line in ``logs/mcp.log``, and the server goes on
answering. The real ``vigil mcp`` runs in a subprocess; the test writes JSON-RPC
lines to its stdin as an agent CLI would, since the SDK's client cannot send them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

from vigil.mcp_transport import MAX_LINE_BYTES
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore

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
