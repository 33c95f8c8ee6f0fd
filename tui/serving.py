"""``vigil tui --serve``: the same dashboard in a browser, through textual-serve,
behind Vigil's token.

textual-serve is an aiohttp server that starts one app process per websocket (a
browser tab) and relays the terminal's bytes. It has no authentication; here an
aiohttp middleware wraps every route, the websocket's included: a request needs
the token (``vigil.dashboard_access``), as ``?token=`` (which sets a cookie and
redirects to the same page without it, so it leaves the address bar) or as that
cookie. Anything else is answered 401 before any handler runs, so no app process is
started. The token file is read at each request: a rotated token locks out the
old links and cookies at once.

Each session's process is ``vigil --home H tui --browser-session ID`` (``--readonly``
passed through; ``--task N`` for a link to a task): the dashboard a terminal gets,
auditing its writes as ``human (browser session ID)``. The server logs each
session's start and end, and on SIGTERM or SIGINT ends every session's process
(asked to quit, then killed after ``STOP_GRACE_S``) before it exits; a session
whose server was killed outright exits by itself (``VigilApp``'s ``server_pid``).

textual-serve 1.1 is pinned below 1.2: ``DashboardServer`` replaces its routes and
its websocket handler, and ``SessionService`` its way of starting the process (an
argv, not a shell line).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import secrets
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from vigil.config import Settings
from vigil.dashboard_access import read_digest, token_matches
from vigil.errors import HomeError, OperationError
from vigil.logfile import PrintableFilter

log = logging.getLogger("vigil.serve")

COOKIE = "vigil_dashboard"
COOKIE_MAX_AGE_S = 90 * 24 * 3600  # a phone stays logged in; rotating the token ends it
STOP_GRACE_S = 5.0  # a session's app has this long to quit before it is killed
SHUTDOWN_TIMEOUT_S = 10.0
PAGE = Path(__file__).with_name("served_page.html")
UNAUTHORIZED = (
    "401: this Vigil dashboard needs its token. Open the link that `vigil tui --serve --print-url` prints "
    "on the machine that serves it.\n"
)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the dashboard on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def exposure_line(base_url: str, host: str, port: int, readonly: bool) -> str:
    """The start-up line: where it listens, who can reach it, and what they can do."""
    what = "watch only (read-only)" if readonly else "watch and steer, as a person would in the terminal"
    if is_loopback(host):
        reach = (
            f"loopback only ({host}:{port}): reachable from this machine alone; "
            "from a phone, through an SSH tunnel or Tailscale (docs/tui.md)"
        )
    else:
        reach = (
            f"WARNING: listening on {host}:{port}, reachable by every machine that can route to it, "
            "over plain HTTP: unless a TLS proxy is in front, the token and every screen cross the network "
            "in clear text"
        )
    return (
        f"serving the dashboard at {base_url}/: {reach}; whoever has the token can {what}; "
        "`vigil tui --serve --print-url` prints the link"
    )


@dataclass
class Session:
    """One browser tab's app process."""

    id: str
    peer: str
    service: SessionService
    websocket: web.WebSocketResponse
    started: float = field(default_factory=time.monotonic)


class SessionService(AppService):
    """textual-serve's app service, starting ``argv`` directly (no shell between
    the server and the app, so ending the process ends the app)."""

    def __init__(self, argv: list[str], **kwargs: Any) -> None:
        super().__init__(argv[0], **kwargs)
        self.argv = argv

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        environment = self._build_environment(width=width, height=height)
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment,
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        return self._process

    async def end(self) -> int | None:
        """Ask the app to quit, wait ``STOP_GRACE_S``, then kill it; its exit code."""
        process = self._process
        with contextlib.suppress(TimeoutError, ConnectionError, RuntimeError):
            await asyncio.wait_for(self.stop(), STOP_GRACE_S)
        if process is None:
            return None
        if process.returncode is None:
            try:
                await asyncio.wait_for(process.wait(), STOP_GRACE_S)
            except TimeoutError:
                log.warning("an app process (pid %d) did not quit in %.0f s: killed", process.pid, STOP_GRACE_S)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        return process.returncode


class DashboardServer(Server):
    """The dashboard of ``settings.home`` for browsers, one app process per tab."""

    def __init__(self, settings: Settings, *, host: str, port: int, readonly: bool, public_url: str | None) -> None:
        super().__init__(command="vigil tui", host=host, port=port, title="Vigil", public_url=public_url)
        self.settings = settings
        self.readonly = readonly
        self.sessions: dict[str, Session] = {}
        self.secure_cookie = self.public_url.startswith("https://")
        self.on_ready: Callable[[], None] = lambda: None  # called once it listens

    def app_argv(self, session_id: str, task_id: int | None) -> list[str]:
        """The command of one session's app: the terminal dashboard, in this Python."""
        argv = [sys.executable, "-m", "vigil", "--home", str(self.settings.home), "tui"]
        argv += ["--browser-session", session_id]
        if self.readonly:
            argv.append("--readonly")
        if task_id is not None:
            argv += ["--task", str(task_id)]
        return argv

    # --- the token --------------------------------------------------------------------
    @web.middleware
    async def require_token(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            expected = read_digest(self.settings.home)
        except HomeError as err:
            log.error("%s", err)
            expected = None  # nobody gets in while the token file is unusable
        presented = request.query.get("token")
        if presented is not None:
            if not token_matches(expected, presented):
                return self._refused(request, "a wrong token in the link")
            # Keep the token out of the address bar and the history: a cookie, then the page.
            rest = {key: value for key, value in request.query.items() if key != "token"}
            target = request.path + (f"?{urlencode(rest)}" if rest else "")
            response = web.HTTPFound(target)
            response.set_cookie(
                COOKIE,
                presented,
                max_age=COOKIE_MAX_AGE_S,
                httponly=True,
                samesite="Lax",  # a link opened from a notification carries it; other sites' requests do not
                secure=self.secure_cookie,
                path="/",
            )
            return response
        if not token_matches(expected, request.cookies.get(COOKIE)):
            return self._refused(request, "no token" if COOKIE not in request.cookies else "a wrong token")
        return await handler(request)

    def _refused(self, request: web.Request, why: str) -> web.Response:
        log.warning("refused %s %s from %s: %s", request.method, request.path, request.remote, why)
        return web.Response(status=401, text=UNAUTHORIZED, content_type="text/plain")

    # --- the aiohttp application ------------------------------------------------------
    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self.require_token])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(PAGE.parent))
        app.add_routes(
            [
                web.get("/", self.handle_index, name="index"),
                web.get("/ws", self.handle_websocket, name="websocket"),
                web.get("/ws/task/{task_id:[0-9]+}", self.handle_websocket, name="task_websocket"),
                web.static("/static", self.statics_path, name="static"),
            ]
        )
        app.on_startup.append(self.on_startup)
        app.on_shutdown.append(self.on_shutdown)
        return app

    async def on_startup(self, app: web.Application) -> None:
        pass  # the start-up line is logged once the socket listens (serve_dashboard)

    async def handle_index(self, request: web.Request) -> web.Response:
        """The page; ``?task=ID`` makes its websocket open the dashboard on that task."""
        task = request.query.get("task", "")
        path = f"/ws/task/{int(task)}" if task.isdigit() else "/ws"
        scheme = "wss" if self.public_url.startswith("https") else "ws"
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{scheme}:{self.public_url.split(':', 1)[1]}{path}",
            "config": {"static": {"url": f"{self.public_url}/static/"}},
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template(PAGE.name, request, context)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One tab: start its app process, relay until either side closes, end it."""
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        task = request.match_info.get("task_id")
        session_id = secrets.token_hex(3)
        service = SessionService(
            self.app_argv(session_id, int(task) if task else None),
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=websocket.close,
            download_manager=self.download_manager,
        )
        session = Session(session_id, str(request.remote), service, websocket)
        await websocket.prepare(request)
        self.sessions[session_id] = session
        opened = f", task #{task}" if task else ""
        log.info("browser session %s started from %s (%d×%d%s)", session_id, session.peer, width, height, opened)
        code: int | None = None
        try:
            await service.start(width, height)
            assert service.process is not None
            log.info("browser session %s: app process pid %d", session_id, service.process.pid)
            await self._process_messages(websocket, service)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            code = await service.end()
            await websocket.close()
            self.sessions.pop(session_id, None)
            seconds = time.monotonic() - session.started
            log.info("browser session %s ended after %.0f s (its app exited %s)", session_id, seconds, code)
        return websocket

    async def on_shutdown(self, app: web.Application) -> None:
        """End every session's process (SIGTERM, SIGINT) before the server exits."""
        sessions = list(self.sessions.values())
        if sessions:
            log.info("stopping: ending %d browser session(s)", len(sessions))
        await asyncio.gather(*(session.service.end() for session in sessions), return_exceptions=True)
        await asyncio.gather(*(session.websocket.close() for session in sessions), return_exceptions=True)

    # --- running --------------------------------------------------------------------------
    def serve(self, debug: bool = False) -> None:
        """Listen until SIGTERM or SIGINT. Raises ``OperationError`` when it cannot
        listen (the port is taken)."""
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_exit)
        try:
            web.run_app(
                self._make_app(),
                host=self.host,
                port=self.port,
                handle_signals=False,
                loop=loop,
                access_log=None,  # an access log would keep ?token= links
                print=lambda _message: self.on_ready(),
                shutdown_timeout=SHUTDOWN_TIMEOUT_S,
            )
        except OSError as err:
            raise OperationError(f"cannot listen on {self.host}:{self.port}: {err.strerror or err}") from None
        finally:
            if not loop.is_closed():
                loop.close()


def configure_logging() -> None:
    """Sessions' starts and ends, and refusals, one plain line each on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    handler.addFilter(PrintableFilter())
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def serve_dashboard(settings: Settings, *, host: str, port: int, readonly: bool, public_url: str | None) -> None:
    """Serve the dashboard in the foreground until SIGTERM or SIGINT (logging to
    stderr: ``configure_logging``)."""
    server = DashboardServer(settings, host=host, port=port, readonly=readonly, public_url=public_url)
    server.on_ready = lambda: log.info("%s", exposure_line(server.public_url, host, port, readonly))
    server.serve()
    log.info("stopped; every browser session's process has ended")


def run_serve(
    settings: Settings,
    *,
    host: str | None,
    port: int | None,
    public_url: str | None,
    readonly: bool,
    print_url: bool,
    rotate_token: bool,
) -> list[str]:
    """``vigil tui --serve`` and its options: with ``print_url`` the lines to print
    (the link), else serve until stopped and return nothing. ``host`` None:
    ``[serve] host``, which must then be loopback (another address is exposed only
    when the command line names it). Raises ``InputError`` for bad options."""
    from vigil.config import PUBLIC_URL_EXPECTED, is_public_url
    from vigil.dashboard_access import dashboard_url, make_token, read_digest, token_path
    from vigil.errors import InputError

    if host is None:
        host = settings.serve.host
        if not is_loopback(host):
            raise InputError(
                f"[serve] host = {host!r} would expose the dashboard beyond this machine: "
                f"pass --host {host} to mean it (and put TLS in front; docs/tui.md)"
            )
    port = settings.serve.port if port is None else port
    if public_url is not None:
        public_url = public_url.rstrip("/")
        if not is_public_url(public_url):
            raise InputError(f"--public-url: expected {PUBLIC_URL_EXPECTED}, got {public_url!r}")
    public_url = public_url or settings.serve.public_url
    base = public_url or f"http://{host}:{port}"
    had_one = rotate_token or read_digest(settings.home) is not None
    lines = []
    token = None
    if rotate_token or not had_one:
        token = make_token(settings.home)
        kept = f"only its SHA-256 is kept, in {token_path(settings.home)}"
        if had_one:
            lines.append(f"a new token was made ({kept}): links and logins made before no longer work")
        else:
            lines.append(f"a token was made ({kept}); the link below is shown this once: keep it like a password")
    if print_url:
        if token is None:
            raise InputError(
                "the token is shown only when it is made: only its hash is kept (an agent can read the home); "
                "make a new one with --rotate-token --print-url (browsers logged in before must open the new link)"
            )
        return [*lines, dashboard_url(base, token=token)]
    if token is not None:
        lines.append(f"open: {dashboard_url(base, token=token)}")
    configure_logging()
    for line in lines:
        log.info("%s", line)  # said before serving starts, not after it stops
    serve_dashboard(settings, host=host, port=port, readonly=readonly, public_url=public_url)
    return []
