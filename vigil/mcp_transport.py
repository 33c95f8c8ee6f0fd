"""What reaches the MCP SDK from the agent's side of the pipe: every line that the SDK
would drop without a word is answered here instead.

The SDK's stdio transport parses each line and, when it cannot (a line nested
100,000 deep exhausts the parser; a lone surrogate escape such as ``"\\ud800"`` is
valid JSON that no text can hold), passes the error on to a server that ignores it:
the agent gets no reply and waits for its own timeout. ``LineScreen`` reads the
lines first. A line the SDK could not take, or one longer than ``MAX_LINE_BYTES``,
never reaches it: the request it held (its ``id`` read without parsing the rest)
gets an answer on the SDK's own write stream, and the refusal is logged. A tool
call's answer is an error result (``isError``), the way a tool refuses; any other
request's a JSON-RPC error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import IO, Any

import anyio
import anyio.abc
import anyio.to_thread

from vigil.json_input import MAX_NESTING, lone_surrogate_in, nesting

log = logging.getLogger("vigil.mcp")

# One message from the agent: a note or summary is cut to its cap (vigil.caps) once
# parsed, but the line holding it is read whole first. A line past this is refused
# unread (what was read is dropped), so a 100 MB note cannot cost a gigabyte.
MAX_LINE_BYTES = 4 * 1024 * 1024
CHUNK_BYTES = 64 * 1024
INVALID_REQUEST = -32600  # JSON-RPC 2.0


class Refusal(Exception):
    """A line the SDK must not see, and why."""


class LineScreen:
    """Async iteration over the text lines of ``stdin`` (binary) that the SDK can
    take; the others are answered through ``answer`` (set once the SDK's write
    stream exists, before the first line is read)."""

    def __init__(self, stdin: IO[bytes]) -> None:
        self._stdin = stdin
        self._ready = anyio.Event()
        self._send: anyio.abc.ObjectSendStream[Any] | None = None

    def answer_through(self, send: anyio.abc.ObjectSendStream[Any]) -> None:
        self._send = send
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        await self._ready.wait()
        while True:
            raw, whole = await anyio.to_thread.run_sync(self._read_line)
            if not raw:
                return
            try:
                yield screen(raw, whole)
            except Refusal as why:
                await self._refuse(raw, str(why))

    def _read_line(self) -> tuple[bytes, bool]:
        """The next line (at most ``MAX_LINE_BYTES``; b"" at the end) and whether it
        is whole; the rest of a longer line is read and dropped."""
        line = self._stdin.readline(MAX_LINE_BYTES)
        if len(line) < MAX_LINE_BYTES or line.endswith(b"\n"):
            return line, True
        while True:
            rest = self._stdin.readline(CHUNK_BYTES)
            if not rest or rest.endswith(b"\n"):
                return line, False

    async def _refuse(self, raw: bytes, why: str) -> None:
        from mcp.shared.message import SessionMessage
        from mcp_types import ErrorData, JSONRPCError, JSONRPCResponse

        text = raw.decode("utf-8", errors="replace")
        request_id, method = top_level_id_and_method(text)
        log.warning("refused a message (%s, id %s): %s", method or "no method", request_id, why)
        if request_id is None or self._send is None:
            return  # a notification, or no id to answer: nothing waits for a reply
        message: JSONRPCError | JSONRPCResponse
        if method == "tools/call":
            result = {"content": [{"type": "text", "text": f"refused: {why}"}], "isError": True}
            message = JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
        else:
            message = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=INVALID_REQUEST, message=why))
        await self._send.send(SessionMessage(message))


def screen(raw: bytes, whole: bool) -> str:
    """``raw`` as the text line the SDK gets; raises ``Refusal`` for one it must not."""
    if not whole:
        raise Refusal(f"message longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB")
    text = raw.decode("utf-8", errors="replace")  # as the SDK's own reader decodes
    if not text.strip():
        return text
    if nesting(text) > MAX_NESTING:
        raise Refusal(f"nested deeper than {MAX_NESTING} levels")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise Refusal(f"not JSON: {err}") from None
    if lone_surrogate_in(value):
        raise Refusal("a text holds a lone surrogate escape (such as \\ud800), which is not UTF-8")
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    try:
        jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as err:
        raise Refusal(f"not a JSON-RPC message: {err.errors()[0]['msg']}") from None
    return text


def top_level_id_and_method(text: str) -> tuple[int | str | None, str | None]:
    """The ``id`` and ``method`` of the JSON object ``text`` begins, read from its top
    level only (not from inside ``params``), without parsing what is nested: the
    text may be too deep, too long or cut. None for what is not there or unreadable."""
    decoder = json.JSONDecoder()
    found: dict[str, object] = {}
    depth, i, key = 0, 0, None
    while i < len(text) and len(found) < 2:
        char = text[i]
        if depth == 1 and char not in " \t\r\n,:[]{}":  # a key, or a value that is not nested
            try:
                value, i = decoder.raw_decode(text, i)
            except ValueError:
                break
            if key is None and isinstance(value, str) and _next_char(text, i) == ":":
                key = value
            else:
                if key in ("id", "method"):
                    found[key] = value
                key = None
            continue
        if char == '"':
            i = _string_end(text, i)  # a string inside a nested value: its brackets are text
            continue
        depth += (char in "[{") - (char in "]}")
        if depth == 1 and char in "]}":
            key = None  # the nested value of ``key`` ended
        i += 1
    request_id, method = found.get("id"), found.get("method")
    return (
        request_id if isinstance(request_id, int | str) and not isinstance(request_id, bool) else None,
        method if isinstance(method, str) else None,
    )


def _string_end(text: str, start: int) -> int:
    """The index just past the JSON string starting at ``start`` (its quote)."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return len(text)


def _next_char(text: str, start: int) -> str:
    """The first character at or after ``start`` that is not white space ("" at the end)."""
    while start < len(text) and text[start] in " \t\r\n":
        start += 1
    return text[start : start + 1]
