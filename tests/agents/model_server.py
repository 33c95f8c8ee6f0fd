"""A scriptable local model server for the real agent CLIs, run inside the tests.

``ModelServer`` is a stdlib HTTP server on ``127.0.0.1`` and an ephemeral port, served
from a daemon thread. It knows no API itself: an API module (``anthropic_api`` for
Claude Code's Messages API; a sibling for OpenAI's Responses API) registers a handler
for a path prefix. Every request is recorded (``requests``) before it is answered, so
a test can assert on what the CLI sent.

What the model answers is *scripted* with the API-neutral ``Reply`` values below,
consumed in order from a ``Script`` (one per API); when the script runs out, its
default answer is used. Each API module renders a ``Reply`` in its own wire format.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Tokens the server reports for one reply (the CLI turns them into cost)."""

    input: int = 120
    output: int = 30
    cache_read: int = 40
    cache_write: int = 20


@dataclass(frozen=True)
class Text:
    """Answer with this text and end the turn."""

    text: str
    usage: Usage = Usage()
    headers: tuple[tuple[str, str], ...] = ()  # sent with the answer (e.g. the rate-limit headers)


@dataclass(frozen=True)
class ToolCall:
    """Ask the CLI to call a tool (e.g. ``Bash`` with ``{"command": "…"}``); the CLI
    runs it and sends the result in its next request."""

    name: str
    input: dict[str, Any]
    text: str = ""  # said before the call, if anything
    usage: Usage = Usage()


@dataclass(frozen=True)
class HttpError:
    """Refuse the request: an HTTP status, a JSON body and extra headers."""

    status: int
    body: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Cut:
    """Start streaming an answer, send ``text`` so far, then drop the connection."""

    text: str = "I was about to"


@dataclass(frozen=True)
class Slow:
    """Wait ``delay_s`` seconds before answering with ``then``."""

    delay_s: float
    then: Reply


@dataclass(frozen=True)
class Silent:
    """Start streaming an answer (its first event only), then send nothing more for
    ``hold_s`` seconds: a model that went silent mid-answer."""

    hold_s: float = 300.0


@dataclass(frozen=True)
class Burst:
    """Answer ``during`` until the monotonic clock reads ``until`` (an outage of a
    fixed length, however many requests meet it), then ``after``."""

    until: float
    during: Reply
    after: Reply


Reply = Text | ToolCall | HttpError | Cut | Slow | Silent | Burst


def hold_silent(exchange: Exchange, hold_s: float) -> None:
    """Keep an answer's connection open and send nothing (``Silent``), until the
    client hangs up or ``hold_s`` passes."""
    deadline = time.monotonic() + hold_s
    while time.monotonic() < deadline:
        if exchange.hung_up():
            return
        time.sleep(0.2)


def unauthorized() -> HttpError:
    return HttpError(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})


def rate_limited(reset_epoch_s: int, retry_after_s: int = 1) -> HttpError:
    """429 with the rate-limit headers the Anthropic API sends."""
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(reset_epoch_s))
    return HttpError(
        429,
        {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"},
        },
        (
            ("retry-after", str(retry_after_s)),
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", reset),
            ("anthropic-ratelimit-unified-status", "rejected"),
            ("anthropic-ratelimit-unified-reset", str(reset_epoch_s)),
            ("anthropic-ratelimit-unified-representative-claim", "five_hour"),
            ("anthropic-ratelimit-unified-5h-status", "rejected"),
            ("anthropic-ratelimit-unified-5h-reset", str(reset_epoch_s)),
        ),
    )


def overloaded(retry_after_s: int | None = None) -> HttpError:
    headers = () if retry_after_s is None else (("retry-after", str(retry_after_s)),)
    return HttpError(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, headers)


def server_error(retry_after_s: int | None = None) -> HttpError:
    headers = () if retry_after_s is None else (("retry-after", str(retry_after_s)),)
    return HttpError(
        500, {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}, headers
    )


def bad_request(message: str = "messages: text content blocks must be non-empty") -> HttpError:
    """400: the Messages API refuses the request itself."""
    return HttpError(400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}})


class Script:
    """Replies consumed in order, thread-safe; ``default`` once they run out."""

    def __init__(self, default: Reply) -> None:
        self.default = default
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.served = 0  # replies handed out, the default included

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def set(self, replies: Iterable[Reply]) -> None:
        """Replace what is left of the script."""
        with self._lock:
            self._replies = deque(replies)

    def next(self) -> Reply:
        with self._lock:
            self.served += 1
            return self._replies.popleft() if self._replies else self.default

    @property
    def left(self) -> int:
        with self._lock:
            return len(self._replies)


@dataclass(frozen=True)
class Recorded:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it was not JSON


class Exchange:
    """One request and the means to answer it, handed to an API's handler."""

    def __init__(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        self._handler = handler
        self.body = body
        self.path = handler.path
        self.headers = {k.lower(): v for k, v in handler.headers.items()}

    def send_json(self, status: int, payload: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
        data = json.dumps(payload).encode()
        h = self._handler
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        for name, value in headers:
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()

    def start_events(self, headers: Iterable[tuple[str, str]] = ()) -> None:
        """Begin a server-sent-events answer, with extra ``headers``; the connection
        closes at its end."""
        h = self._handler
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("cache-control", "no-cache")
        for name, value in headers:
            h.send_header(name, value)
        h.send_header("connection", "close")
        for name, value in headers:
            h.send_header(name, value)
        h.end_headers()
        h.close_connection = True

    def event(self, name: str, data: Any) -> None:
        self._handler.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self._handler.wfile.flush()

    def hung_up(self) -> bool:
        """Whether the client closed the connection (a read would return nothing)."""
        sock = self._handler.connection
        try:
            ready, _, _ = select.select([sock], [], [], 0)
            return bool(ready) and sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def cut(self) -> None:
        """Drop the connection at once, mid-answer."""
        self._handler.close_connection = True
        self._handler.wfile.flush()
        self._handler.connection.shutdown(2)


Handler = Callable[[Exchange], None]


@dataclass
class ModelServer:
    """The server; ``url`` is ``http://127.0.0.1:PORT`` once started."""

    routes: list[tuple[str, Handler]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: ThreadingHTTPServer | None = None

    def route(self, path_prefix: str, handler: Handler) -> None:
        """Send POSTs whose path starts with ``path_prefix`` to ``handler`` (the
        longest matching prefix wins); anything else gets a 404."""
        self.routes.append((path_prefix, handler))
        self.routes.sort(key=lambda r: -len(r[0]))

    @property
    def url(self) -> str:
        assert self._httpd is not None, "the server is not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def recorded(self, path_prefix: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith(path_prefix)]

    @contextmanager
    def running(self) -> Iterator[ModelServer]:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                server._serve(self, "POST")

            def do_GET(self) -> None:
                server._serve(self, "GET")

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests assert on ``requests``

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        thread = threading.Thread(target=httpd.serve_forever, name="model-server", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=5)

    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", errors="replace")
        headers = {k.lower(): v for k, v in handler.headers.items()}
        with self._lock:
            self.requests.append(Recorded(method, handler.path, headers, body))
        exchange = Exchange(handler, body)
        for prefix, route in self.routes:
            if method == "POST" and handler.path.startswith(prefix):
                # the CLI may hang up (a timeout, a kill): then there is nothing to answer
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    route(exchange)
                return
        exchange.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": handler.path}})


def deliver(exchange: Exchange, reply: Reply, render: Callable[[Exchange, Reply], None]) -> None:
    """Answer with ``reply`` through an API's ``render``: errors and delays are the
    same for every API, so they are handled here."""
    if isinstance(reply, Slow):
        time.sleep(reply.delay_s)
        deliver(exchange, reply.then, render)
    elif isinstance(reply, Burst):
        deliver(exchange, reply.during if time.monotonic() < reply.until else reply.after, render)
    elif isinstance(reply, HttpError):
        exchange.send_json(reply.status, reply.body, reply.headers)
    else:
        render(exchange, reply)
