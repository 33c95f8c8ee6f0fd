"""The OpenAI Responses API on the local model server, as Codex uses it.

Codex 0.171.0 with a ``[model_providers.NAME]`` entry (``wire_api = "responses"``)
sends ``POST {base_url}/responses`` with ``"stream": true``, its tools (the shell
is ``exec_command`` with ``{"cmd": "…"}``) and, after a tool call, the call's
``function_call_output`` in the next request's ``input``. It reads server-sent
events: ``response.created``, then per output item ``response.output_item.added``,
``response.output_text.delta`` (text only) and ``response.output_item.done``, and
last ``response.completed`` with the usage. A stream that ends before
``response.completed`` is "stream disconnected before completion" to Codex.

Usage follows OpenAI's convention: ``input_tokens`` counts every input token, the
cached ones (``input_tokens_details.cached_tokens``) and those written to the
cache (``input_tokens_details.cache_write_tokens``) included.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.agents.model_server import (
    Cut,
    Exchange,
    HttpError,
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
SHELL_TOOL = "exec_command"  # Codex's shell: {"cmd": "<a shell command line>"}
# Codex offers an MCP server's tools as a namespace (``mcp__vigil``) of functions; a
# call names the function and its namespace. A ToolCall names both as "namespace/name".
VIGIL_NAMESPACE = "mcp__vigil"
PROVIDER = "vigil-test"
_ids = itertools.count(1)


def shell(command: str, *, usage: Usage | None = None) -> ToolCall:
    """Ask Codex to run ``command`` in its shell (inside its sandbox)."""
    return ToolCall(SHELL_TOOL, {"cmd": command}, usage=usage or Usage())


def vigil_tool(name: str, **arguments: Any) -> ToolCall:
    """Call one of Vigil's MCP tools (``note``, ``close`` …) with ``arguments``."""
    return ToolCall(f"{VIGIL_NAMESPACE}/{name}", arguments)


def unauthorized() -> HttpError:
    return HttpError(
        401,
        {
            "error": {
                "message": "Incorrect API key provided",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        },
    )


def usage_limit(reset_epoch_s: int) -> HttpError:
    """429 as the ChatGPT back end sends it when a plan's usage limit is reached,
    with its rate-limit headers."""
    return HttpError(
        429,
        {
            "error": {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": "plus",
                "resets_at": reset_epoch_s,
                "resets_in_seconds": max(reset_epoch_s - int(time.time()), 0),
            }
        },
        (
            ("x-codex-primary-used-percent", "100"),
            ("x-codex-primary-window-minutes", "300"),
            ("x-codex-primary-reset-at", str(reset_epoch_s)),
        ),
    )


def server_error() -> HttpError:
    return HttpError(500, {"error": {"message": "Internal server error", "type": "server_error"}})


def rate_limited(retry_after_s: int = 1) -> HttpError:
    """429 for an API key's rate limit, with the headers OpenAI sends."""
    return HttpError(
        429,
        {"error": {"type": "rate_limit_exceeded", "message": "Rate limit reached", "code": "rate_limit_exceeded"}},
        (("retry-after", str(retry_after_s)), ("x-ratelimit-reset-requests", f"{retry_after_s}s")),
    )


def bad_request(message: str = "Invalid 'input': text must not be empty") -> HttpError:
    """400: the API refuses the request itself."""
    return HttpError(400, {"error": {"type": "invalid_request_error", "message": message, "code": "invalid_value"}})


class ResponsesApi:
    """``POST /v1/responses`` on a ``ModelServer``; every request takes the next
    reply of ``script``."""

    def __init__(self, server: ModelServer) -> None:
        self.server = server
        self.script = Script(Text(DEFAULT_ANSWER))
        self.headers: tuple[tuple[str, str], ...] = ()  # sent with every answer (e.g. ``codex_limits``)
        server.route("/v1/responses", self._responses)

    def requests(self) -> list[dict[str, Any]]:
        """Bodies of the requests Codex sent."""
        return [r.body for r in self.server.recorded("/v1/responses") if isinstance(r.body, dict)]

    def tool_outputs(self) -> list[str]:
        """What Codex sent back as the output of each tool call, in order (each
        request repeats the conversation so far: the last one holds them all)."""
        requests = self.requests()
        return [
            str(item.get("output"))
            for item in (requests[-1].get("input", []) if requests else [])
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]

    def _responses(self, exchange: Exchange) -> None:
        body = exchange.body if isinstance(exchange.body, dict) else {}
        model = str(body.get("model") or "gpt-test")
        deliver(exchange, self.script.next(), lambda ex, reply: _render(ex, reply, model, self.headers))


def codex_limits(primary_percent: float, primary_reset_s: int, secondary_percent: float) -> tuple[tuple[str, str], ...]:
    """The headers in which the API tells Codex (0.171.0) how much of its windows
    is used: five hours (``primary``) and a week (``secondary``)."""
    return (
        ("x-codex-primary-used-percent", f"{primary_percent:g}"),
        ("x-codex-primary-window-minutes", "300"),
        ("x-codex-primary-reset-at", str(primary_reset_s)),
        ("x-codex-secondary-used-percent", f"{secondary_percent:g}"),
        ("x-codex-secondary-window-minutes", "10080"),
    )


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input + usage.cache_read + usage.cache_write,
        "input_tokens_details": {"cached_tokens": usage.cache_read, "cache_write_tokens": usage.cache_write},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input + usage.cache_read + usage.cache_write + usage.output,
    }


def _message(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"type": "message", "id": item_id, "role": "assistant", "status": status, "content": content}


def _render(exchange: Exchange, reply: Reply, model: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
    response_id = f"resp_{next(_ids):04d}"
    exchange.start_events((*headers, *(reply.headers if isinstance(reply, Text) else ())))
    exchange.event("response.created", {"type": "response.created", "response": {"id": response_id, "model": model}})
    if isinstance(reply, Silent):
        hold_silent(exchange, reply.hold_s)
        return
    if isinstance(reply, Cut | Text):
        item_id = f"msg_{next(_ids):04d}"
        exchange.event(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": _message(item_id, "", "in_progress")},
        )
        exchange.event(
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "output_index": 0,
                "item_id": item_id,
                "content_index": 0,
                "delta": reply.text,
            },
        )
        if isinstance(reply, Cut):
            exchange.cut()
            return
        done = _message(item_id, reply.text, "completed")
        exchange.event(
            "response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": done}
        )
    elif isinstance(reply, ToolCall):
        number = next(_ids)
        namespace, _, name = reply.name.rpartition("/")
        call = {
            "type": "function_call",
            "id": f"fc_{number:04d}",
            "call_id": f"call_{number:04d}",
            "name": name,
            "arguments": json.dumps(reply.input),
        }
        if namespace:
            call["namespace"] = namespace
        for event in ("response.output_item.added", "response.output_item.done"):
            exchange.event(event, {"type": event, "output_index": 0, "item": call})
    else:
        raise TypeError(f"not a model answer: {reply!r}")
    exchange.event(
        "response.completed",
        {"type": "response.completed", "response": {"id": response_id, "model": model, "usage": _usage(reply.usage)}},
    )


def codex_config(codex_home: Path, base_url: str, *, model: str = "gpt-5-codex") -> None:
    """Write ``codex_home/config.toml``: Codex talks only to the local server (through
        a provider of its own, as Codex ignores ``OPENAI_BASE_URL``) with the key from
        ``OPENAI_API_KEY``, and tries a failed request once more (one "Reconnecting... 1/1"),
    not for minutes."""
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{model}"\n'
        f'model_provider = "{PROVIDER}"\n'
        "check_for_update_on_startup = false\n"
        f"[model_providers.{PROVIDER}]\n"
        'name = "Vigil test server"\n'
        f'base_url = "{base_url}/v1"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 1\n"
        "stream_idle_timeout_ms = 20000\n"
    )


@contextmanager
def openai_server() -> Iterator[ResponsesApi]:
    """A running model server with the Responses API; ``api.server.url`` is what
    ``codex_config`` points Codex at."""
    server = ModelServer()
    api = ResponsesApi(server)
    with server.running():
        yield api
