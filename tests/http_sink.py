"""A local HTTP server that records what is POSTed to it: the receiving end of an
apprise ``json://127.0.0.1:PORT/…`` notification in tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Sink:
    """The server's address and the JSON bodies received, by path, in order."""

    port: int
    received: list[tuple[str, Any]] = field(default_factory=list)

    def url(self, path: str = "vigil") -> str:
        """The apprise URL that posts JSON here."""
        return f"json://127.0.0.1:{self.port}/{path}"


@contextmanager
def http_sink() -> Iterator[Sink]:
    """A running sink on 127.0.0.1 and an ephemeral port, stopped on exit."""
    sink = Sink(0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                parsed: Any = json.loads(body)
            except ValueError:
                parsed = body.decode(errors="replace")
            sink.received.append((self.path, parsed))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test asserts on what was received."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sink.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
