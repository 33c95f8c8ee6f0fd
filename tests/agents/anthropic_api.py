"""The Anthropic Messages API on the local model server, as Claude Code uses it.

Claude Code sends ``POST /v1/messages?beta=true`` with ``"stream": true`` and reads
server-sent events: ``message_start`` (usage with cache tokens), a
``content_block_start`` / ``…_delta`` / ``…_stop`` triple per block (``text_delta``
for text, ``input_json_delta`` for a ``tool_use`` block's input), ``message_delta``
(stop reason, output tokens) and ``message_stop``.

Requests of the agent's conversation (they offer tools) take their replies from
``MessagesApi.script``, or from the script of the credential they carry
(``script_for``: an account's key or login token, for tests with several
accounts); any other request to ``/v1/messages`` (a helper call on a
small model, token counting) is answered from ``side`` so that it never eats a
scripted reply. With ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` Claude Code
2.1.197 makes no such side request in print mode; the split is a safety net.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.agents.model_server import (
    Cut,
    Exchange,
    ModelServer,
    Reply,
    Script,
    Silent,
    Text,
    ToolCall,
    Usage,
    deliver,
    hold_silent,
)

DEFAULT_ANSWER = "Done."
VIGIL_TOOL_PREFIX = "mcp__vigil__"  # how Claude Code names the tools of the MCP server called vigil
_ids = itertools.count(1)


class MessagesApi:
    """``POST /v1/messages`` (and ``/v1/messages/count_tokens``) on a ``ModelServer``."""

    def __init__(self, server: ModelServer) -> None:
        self.server = server
        self.script = Script(Text(DEFAULT_ANSWER))
        self.side = Script(Text("ok"))
        self.by_credential: dict[str, Script] = {}
        self.headers: tuple[tuple[str, str], ...] = ()  # sent with every streamed answer
        server.route("/v1/messages/count_tokens", self._count_tokens)
        server.route("/v1/messages", self._messages)

    def conversation(self) -> list[dict[str, Any]]:
        """Bodies of the requests that belong to the agent's conversation."""
        return [r.body for r in self.server.recorded("/v1/messages") if _is_conversation(r.body)]

    def script_for(self, credential: str) -> Script:
        """The script of requests that carry ``credential`` (an API key, or a login's
        bearer token); made on first use, answering the default until told more."""
        return self.by_credential.setdefault(credential, Script(Text(DEFAULT_ANSWER)))

    def credential_of(self, headers: dict[str, str]) -> str:
        """The key or token a request carries."""
        return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")

    def _count_tokens(self, exchange: Exchange) -> None:
        exchange.send_json(200, {"input_tokens": 100})

    def _messages(self, exchange: Exchange) -> None:
        body = exchange.body if isinstance(exchange.body, dict) else {}
        script = self.by_credential.get(self.credential_of(exchange.headers), self.script)
        reply = script.next() if _is_conversation(body) else self.side.next()
        model = str(body.get("model") or "claude-test")
        streaming = bool(body.get("stream"))
        deliver(exchange, reply, lambda ex, r: _render(ex, r, model, streaming, self.headers))


def vigil_tool(name: str, **arguments: Any) -> ToolCall:
    """Call one of Vigil's MCP tools (``note``, ``close`` …) with ``arguments``."""
    return ToolCall(VIGIL_TOOL_PREFIX + name, arguments)


def _is_conversation(body: Any) -> bool:
    return isinstance(body, dict) and bool(body.get("tools"))


def _usage(usage: Usage, output: int) -> dict[str, int]:
    return {
        "input_tokens": usage.input,
        "output_tokens": output,
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation_input_tokens": usage.cache_write,
    }


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    if isinstance(reply, Text):
        return [{"type": "text", "text": reply.text}]
    if isinstance(reply, ToolCall):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        blocks.append({"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": reply.name, "input": reply.input})
        return blocks
    raise TypeError(f"not a model answer: {reply!r}")


def _render(
    exchange: Exchange, reply: Reply, model: str, streaming: bool, headers: tuple[tuple[str, str], ...] = ()
) -> None:
    message_id = f"msg_{next(_ids):04d}"
    if isinstance(reply, Silent):
        exchange.start_events()
        exchange.event("message_start", _start(message_id, model, Usage()))
        hold_silent(exchange, reply.hold_s)
        return
    if isinstance(reply, Cut):
        exchange.start_events()
        exchange.event("message_start", _start(message_id, model, Usage()))
        exchange.event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
        exchange.event(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": reply.text}},
        )
        exchange.cut()
        return
    assert isinstance(reply, Text | ToolCall)
    blocks = _blocks(reply)
    stop = "tool_use" if isinstance(reply, ToolCall) else "end_turn"
    if not streaming:
        exchange.send_json(
            200,
            {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": _usage(reply.usage, reply.usage.output),
            },
        )
        return
    exchange.start_events((*headers, *(reply.headers if isinstance(reply, Text) else ())))
    exchange.event("message_start", _start(message_id, model, reply.usage))
    for index, block in enumerate(blocks):
        for name, data in _block_events(index, block):
            exchange.event(name, data)
    exchange.event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": reply.usage.output},
        },
    )
    exchange.event("message_stop", {"type": "message_stop"})


def _start(message_id: str, model: str, usage: Usage) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": _usage(usage, 1),
        },
    }


def _block_events(index: int, block: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    if block["type"] == "text":
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        )
        yield (
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}},
        )
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


@contextmanager
def anthropic_server() -> Iterator[MessagesApi]:
    """A running model server with the Messages API; ``api.server.url`` is the
    ``ANTHROPIC_BASE_URL`` to give Claude Code."""
    server = ModelServer()
    api = MessagesApi(server)
    with server.running():
        yield api
