"""A scripted GitHub REST API on 127.0.0.1, for the github sensor and pull requests.

``GitHubServer`` is a stdlib HTTP server on an ephemeral port, served from a daemon
thread. It holds one repository's issues (``add_issue``) and answers the endpoints
Vigil uses. It cannot drift from GitHub's schema: every JSON body it serves is
validated against githubkit's own models (generated from GitHub's OpenAPI
description) before it is sent, and a request with a query parameter the endpoint
does not take, or without the expected token, is answered 400/401 and recorded as a
``problem`` that the fixture fails the test on.

List answers carry an ``ETag`` (a hash of the body) and honour ``If-None-Match``
with a 304, as GitHub does. ``rate_limit_next(reset_at_s)`` makes the next request
answer GitHub's primary rate-limit 403 (``x-ratelimit-remaining: 0`` and
``x-ratelimit-reset``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from githubkit_schemas.latest.models import Issue
from pydantic import TypeAdapter

STAMP = "2026-01-02T03:04:05Z"
ISSUE_LIST_PARAMS = frozenset(
    {"milestone", "state", "assignee", "type", "creator", "mentioned", "labels", "sort", "direction", "since"}
    | {"per_page", "page"}
)
_ISSUES = TypeAdapter(list[Issue])


def user_json(login: str, user_id: int = 1) -> dict[str, Any]:
    """A GitHub user (``SimpleUser``) as the API serves it."""
    base = f"https://api.github.com/users/{login}"
    return {
        "login": login,
        "id": user_id,
        "node_id": f"U_{user_id}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id}",
        "gravatar_id": "",
        "url": base,
        "html_url": f"https://github.com/{login}",
        **{
            f"{name}_url": f"{base}/{name}"
            for name in (
                "followers",
                "following",
                "gists",
                "starred",
                "subscriptions",
                "organizations",
                "repos",
                "events",
                "received_events",
            )
        },
        "type": "User",
        "site_admin": False,
    }


@dataclass
class Seen:
    """One request as received: method, path, query (each key's values), headers."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass
class GitHubServer:
    """The scripted API for one repository (``owner/name``); ``token`` is the one it accepts."""

    owner: str
    name: str
    token: str
    port: int = 0
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _rate_limit_reset_s: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def repo_api(self) -> str:
        return f"https://api.github.com/repos/{self.owner}/{self.name}"

    def add_issue(
        self,
        number: int,
        title: str,
        body: str | None = "",
        *,
        labels: tuple[str, ...] = ("vigil",),
        author: str = "alice",
        association: str = "OWNER",
        assignee: str | None = None,
        pull_request: bool = False,
    ) -> dict[str, Any]:
        """Open an issue (or, with ``pull_request``, a pull request as the issues list shows it)."""
        api = f"{self.repo_api}/issues/{number}"
        issue: dict[str, Any] = {
            "id": 1000 + number,
            "node_id": f"I_{number}",
            "url": api,
            "repository_url": self.repo_api,
            "labels_url": f"{api}/labels{{/name}}",
            "comments_url": f"{api}/comments",
            "events_url": f"{api}/events",
            "html_url": f"https://github.com/{self.owner}/{self.name}/issues/{number}",
            "number": number,
            "state": "open",
            "title": title,
            "body": body,
            "user": user_json(author, 10 + number),
            "labels": [self._label(name) for name in labels],
            "assignee": user_json(assignee, 99) if assignee else None,
            "assignees": [user_json(assignee, 99)] if assignee else [],
            "milestone": None,
            "locked": False,
            "comments": 0,
            "closed_at": None,
            "created_at": STAMP,
            "updated_at": STAMP,
            "author_association": association,
        }
        if pull_request:
            issue["pull_request"] = {
                "url": f"{self.repo_api}/pulls/{number}",
                "html_url": f"https://github.com/{self.owner}/{self.name}/pull/{number}",
                "diff_url": None,
                "patch_url": None,
            }
        Issue.model_validate(issue)
        with self._lock:
            self.issues[number] = issue
        return issue

    def close_issue(self, number: int) -> None:
        with self._lock:
            self.issues[number]["state"] = "closed"

    def rate_limit_next(self, reset_at_s: int) -> None:
        """Answer the next request with a primary rate-limit 403 resetting at ``reset_at_s`` (epoch s)."""
        with self._lock:
            self._rate_limit_reset_s = reset_at_s

    def _label(self, name: str) -> dict[str, Any]:
        return {
            "id": abs(hash(name)) % 10_000,
            "node_id": f"L_{name}",
            "url": f"{self.repo_api}/labels/{name}",
            "name": name,
            "description": None,
            "color": "ededed",
            "default": False,
            "archived_at": None,
            "archived_by": None,
        }

    # -- answering -------------------------------------------------------------

    def answer(self, seen: Seen) -> tuple[int, dict[str, str], Any]:
        """Status, headers and JSON body (None: empty) for one request."""
        with self._lock:
            self.requests.append(seen)
            if seen.headers.get("authorization") not in (f"token {self.token}", f"Bearer {self.token}"):
                return self._problem(401, "Bad credentials", "a request without the expected token")
            if self._rate_limit_reset_s is not None:
                reset, self._rate_limit_reset_s = self._rate_limit_reset_s, None
                headers = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
                return (
                    403,
                    headers,
                    {"message": "API rate limit exceeded", "documentation_url": "https://docs.github.com"},
                )
            issues_path = f"/repos/{self.owner}/{self.name}/issues"
            if seen.method == "GET" and seen.path == issues_path:
                return self._list_issues(seen)
            return self._problem(404, "Not Found", f"no scripted endpoint for {seen.method} {seen.path}")

    def _problem(self, status: int, message: str, problem: str) -> tuple[int, dict[str, str], Any]:
        self.problems.append(problem)
        return status, {}, {"message": message}

    def _list_issues(self, seen: Seen) -> tuple[int, dict[str, str], Any]:
        unknown = set(seen.query) - ISSUE_LIST_PARAMS
        if unknown:
            return self._problem(400, "Bad request", f"list issues does not take {sorted(unknown)}")
        query = {key: values[-1] for key, values in seen.query.items()}
        wanted = {label for label in query.get("labels", "").split(",") if label}
        state = query.get("state", "open")
        assignee = query.get("assignee")
        found = [
            issue
            for issue in sorted(self.issues.values(), key=lambda i: -int(i["number"]))
            if (state == "all" or issue["state"] == state)
            and wanted <= {label["name"] for label in issue["labels"]}
            and (assignee is None or (issue["assignee"] or {}).get("login") == assignee)
        ]
        per_page, page = int(query.get("per_page", "30")), int(query.get("page", "1"))
        body = found[(page - 1) * per_page : page * per_page]
        _ISSUES.validate_python(body)  # what is served is what githubkit's models accept
        etag = '"' + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32] + '"'
        if seen.headers.get("if-none-match") == etag:
            return 304, {"etag": etag}, None
        return 200, {"etag": etag}, body


@contextmanager
def github_server(owner: str = "octo", name: str = "demo", token: str = "ghp_scripted") -> Iterator[GitHubServer]:
    """A running scripted API on 127.0.0.1, stopped on exit."""
    server_state = GitHubServer(owner, name, token)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            seen = Seen(self.command, url.path, parse_qs(url.query), {k.lower(): v for k, v in self.headers.items()})
            status, headers, body = server_state.answer(seen)
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            if body is not None:
                self.send_header("content-type", "application/json; charset=utf-8")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = _serve
        do_POST = _serve
        do_PATCH = _serve

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: tests assert on ``requests``."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server_state
    finally:
        server.shutdown()
        server.server_close()
