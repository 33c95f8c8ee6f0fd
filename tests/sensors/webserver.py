"""A real HTTP server on 127.0.0.1 for the http and feed sensors, whose answers the
test changes: pages, status codes, a slow answer, an endless body, garbage."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain"
    headers: dict[str, str] = field(default_factory=dict)


class LocalServer:
    """``routes[path]`` is served as given; ``/slow`` waits until released,
    ``/endless`` never ends, ``/huge`` declares 5 GB."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append((self.path, dict(self.headers.items())))
                if self.path == "/slow":
                    server.release.wait(30)
                    self._send(Route(body=b"late"))
                elif self.path == "/endless":
                    self.send_response(200)
                    self.end_headers()
                    chunk = b"x" * 65536
                    while not server.release.is_set():
                        self.wfile.write(chunk)
                elif self.path == "/huge":
                    self.send_response(200)
                    self.send_header("Content-Length", str(5 * 1024**3))
                    self.end_headers()
                    self.wfile.write(b"x" * 1024)
                else:
                    self._send(server.routes.get(self.path, Route(404, b"not found")))

            def _send(self, route: Route) -> None:
                self.send_response(route.status)
                self.send_header("Content-Type", route.content_type)
                self.send_header("Content-Length", str(len(route.body)))
                for name, value in route.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(route.body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # the client hung up (the byte cap, a timeout): expected here

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    def url(self, path: str) -> str:
        return self.base + path

    def __enter__(self) -> LocalServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)


def serve() -> Iterator[LocalServer]:
    with LocalServer() as server:
        yield server
