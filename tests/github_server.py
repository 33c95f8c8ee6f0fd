"""A scripted GitHub REST API on 127.0.0.1, for the github sensor and pull requests.

``GitHubServer`` is a stdlib HTTP server on an ephemeral port, served from a daemon
thread. It holds one repository's issues (``add_issue``) and answers the endpoints
Vigil uses. It cannot drift from GitHub's schema: every JSON body it serves is
validated against githubkit's own models (generated from GitHub's OpenAPI
description) before it is sent, and a request with a query parameter the endpoint
does not take, or without the expected token, is answered 400/401 and recorded as a
``problem`` that the fixture fails the test on.

Every ``GET`` answer carries an ``ETag`` (a hash of the body) and honours
``If-None-Match`` with a 304, as GitHub does; ``not_modified`` counts the 304s by
path (GitHub does not count them against the rate limit). ``rate_limit_next(reset_at_s)`` makes the next request
answer GitHub's primary rate-limit 403 (``x-ratelimit-remaining: 0`` and
``x-ratelimit-reset``).

Pull requests: ``GET …/pulls`` (by ``head`` and ``state``) and ``POST …/pulls``,
whose body is validated against githubkit's model of what the endpoint accepts.
The remote is a real bare repository (``remote``): a pull request can be opened
only from a branch that exists there, and one already open from the same branch
is refused with GitHub's 422, as GitHub does.

What comes back on a pull request: ``add_review`` (with its line comments),
``add_check_run`` on a commit, ``end_pull`` (merged or closed), served at
``GET …/pulls/N``, ``…/pulls/N/reviews``, ``…/pulls/N/comments`` and
``…/commits/REF/check-runs``, each validated against githubkit's model. An open
pull request's head commit is the remote branch's, read when it is served: a push
to its branch moves it, as on GitHub.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from githubkit_schemas.latest.models import (
    CheckRun,
    Issue,
    PullRequest,
    PullRequestReview,
    PullRequestReviewComment,
    PullRequestSimple,
    ReposOwnerRepoCommitsRefCheckRunsGetResponse200,
    ReposOwnerRepoPullsPostBody,
)
from pydantic import TypeAdapter

STAMP = "2026-01-02T03:04:05Z"
ISSUE_LIST_PARAMS = frozenset(
    {"milestone", "state", "assignee", "type", "creator", "mentioned", "labels", "sort", "direction", "since"}
    | {"per_page", "page"}
)
PULL_LIST_PARAMS = frozenset({"state", "head", "base", "sort", "direction", "per_page", "page"})
_ISSUES = TypeAdapter(list[Issue])
_PULLS = TypeAdapter(list[PullRequestSimple])
_REVIEWS = TypeAdapter(list[PullRequestReview])
_REVIEW_COMMENTS = TypeAdapter(list[PullRequestReviewComment])
PAGE_PARAMS = frozenset({"per_page", "page"})
CHECK_RUN_PARAMS = frozenset({"check_name", "status", "filter", "app_id"}) | PAGE_PARAMS
REVIEW_COMMENT_PARAMS = frozenset({"sort", "direction", "since"}) | PAGE_PARAMS


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
    body: Any = None  # the parsed JSON body, if any


@dataclass
class GitHubServer:
    """The scripted API for one repository (``owner/name``); ``token`` is the one it accepts."""

    owner: str
    name: str
    token: str
    port: int = 0
    remote: Path | None = None  # the bare repository that pushes reach
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # by pull request
    review_comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # by pull request
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by head commit
    requests: list[Seen] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    not_modified: dict[str, int] = field(default_factory=dict)  # 304s served, by path
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

    def requests_to(self, suffix: str) -> list[Seen]:
        """The requests received whose path ends with ``suffix`` (e.g. ``/issues``)."""
        with self._lock:
            return [seen for seen in self.requests if seen.path.endswith(suffix)]

    def add_review(
        self,
        number: int,
        state: str,
        body: str = "",
        *,
        comments: tuple[tuple[str, int, str], ...] = (),
        author: str = "bob",
        association: str = "MEMBER",
    ) -> int:
        """A review of pull request ``number`` (``CHANGES_REQUESTED``, ``COMMENTED``,
        ``APPROVED``) with line comments ``(path, line, text)``; returns its id."""
        with self._lock:
            pull = self.pulls[number]
            review_id = 7000 + sum(len(r) for r in self.reviews.values())
            html = f"{pull['html_url']}#pullrequestreview-{review_id}"
            review = {
                "id": review_id,
                "node_id": f"PRR_{review_id}",
                "user": user_json(author, 50),
                "body": body,
                "state": state,
                "html_url": html,
                "pull_request_url": pull["url"],
                "_links": {"html": {"href": html}, "pull_request": {"href": pull["url"]}},
                "submitted_at": STAMP,
                "commit_id": pull["head"]["sha"],
                "author_association": association,
            }
            PullRequestReview.model_validate(review)
            self.reviews.setdefault(number, []).append(review)
            for path, line, text in comments:
                comment_id = 8000 + sum(len(c) for c in self.review_comments.values())
                url = f"{self.repo_api}/pulls/comments/{comment_id}"
                comment = {
                    "url": url,
                    "pull_request_review_id": review_id,
                    "id": comment_id,
                    "node_id": f"PRRC_{comment_id}",
                    "diff_hunk": "@@ -1 +1 @@",
                    "path": path,
                    "commit_id": pull["head"]["sha"],
                    "original_commit_id": pull["head"]["sha"],
                    "user": user_json(author, 50),
                    "body": text,
                    "created_at": STAMP,
                    "updated_at": STAMP,
                    "html_url": f"{pull['html_url']}#discussion_r{comment_id}",
                    "pull_request_url": pull["url"],
                    "author_association": association,
                    "_links": {
                        "self": {"href": url},
                        "html": {"href": f"{pull['html_url']}#discussion_r{comment_id}"},
                        "pull_request": {"href": pull["url"]},
                    },
                    "line": line,
                    "side": "RIGHT",
                }
                PullRequestReviewComment.model_validate(comment)
                self.review_comments.setdefault(number, []).append(comment)
            return review_id

    def add_check_run(self, sha: str, name: str, conclusion: str, summary: str = "", *, suite: int = 1) -> None:
        """A completed check run on commit ``sha`` in check suite ``suite``."""
        with self._lock:
            run_id = 9000 + sum(len(r) for r in self.check_runs.values())
            url = f"{self.repo_api}/check-runs/{run_id}"
            run = {
                "id": run_id,
                "head_sha": sha,
                "node_id": f"CR_{run_id}",
                "external_id": str(run_id),
                "url": url,
                "html_url": f"https://github.com/{self.owner}/{self.name}/runs/{run_id}",
                "details_url": None,
                "status": "completed",
                "conclusion": conclusion,
                "started_at": STAMP,
                "completed_at": STAMP,
                "output": {
                    "title": f"{name}: {conclusion}",
                    "summary": summary,
                    "text": None,
                    "annotations_count": 0,
                    "annotations_url": f"{url}/annotations",
                },
                "name": name,
                "check_suite": {"id": suite},
                "app": None,
                "pull_requests": [],
            }
            CheckRun.model_validate(run)
            self.check_runs.setdefault(sha, []).append(run)

    def end_pull(self, number: int, *, merged: bool) -> None:
        """Merge pull request ``number``, or close it without a merge."""
        with self._lock:
            pull = self.pulls[number]
            pull.update(state="closed", closed_at=STAMP, merged=merged, merged_at=STAMP if merged else None)
            PullRequest.model_validate(pull)

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
            pulls_path = f"/repos/{self.owner}/{self.name}/pulls"
            if seen.method == "POST" and seen.path == pulls_path:
                return self._create_pull(seen)
            if seen.method == "GET":
                return self._conditional(seen, self._get(seen, pulls_path))
            return self._problem(404, "Not Found", f"no scripted endpoint for {seen.method} {seen.path}")

    def _get(self, seen: Seen, pulls_path: str) -> tuple[int, dict[str, str], Any]:
        for pull in self.pulls.values():
            self._follow_head(pull)
        if seen.path == f"/repos/{self.owner}/{self.name}/issues":
            return self._list_issues(seen)
        if seen.path == pulls_path:
            return self._list_pulls(seen)
        found = self._pull_news(seen, pulls_path)
        if found is not None:
            return found
        return self._problem(404, "Not Found", f"no scripted endpoint for {seen.method} {seen.path}")

    def _conditional(self, seen: Seen, answer: tuple[int, dict[str, str], Any]) -> tuple[int, dict[str, str], Any]:
        """A 200's ``ETag``, and 304 when the request's ``If-None-Match`` is it."""
        status, headers, body = answer
        if status != 200:
            return answer
        etag = '"' + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32] + '"'
        if seen.headers.get("if-none-match") == etag:
            self.not_modified[seen.path] = self.not_modified.get(seen.path, 0) + 1
            return 304, {**headers, "etag": etag}, None
        return status, {**headers, "etag": etag}, body

    def _follow_head(self, pull: dict[str, Any]) -> None:
        """An open pull request's head commit: its branch's on the remote, now."""
        if pull["state"] != "open":
            return
        sha = self._remote_commit(pull["head"]["ref"])
        if sha is not None and sha != pull["head"]["sha"]:
            pull["head"]["sha"] = sha
            pull["statuses_url"] = f"{self.repo_api}/statuses/{sha}"

    def _problem(self, status: int, message: str, problem: str) -> tuple[int, dict[str, str], Any]:
        self.problems.append(problem)
        return status, {}, {"message": message}

    def _list_pulls(self, seen: Seen) -> tuple[int, dict[str, str], Any]:
        unknown = set(seen.query) - PULL_LIST_PARAMS
        if unknown:
            return self._problem(400, "Bad request", f"list pulls does not take {sorted(unknown)}")
        query = {key: values[-1] for key, values in seen.query.items()}
        state, head = query.get("state", "open"), query.get("head")
        found = [
            pull
            for pull in self.pulls.values()
            if (state == "all" or pull["state"] == state)
            and (head is None or head == f"{self.owner}:{pull['head']['ref']}")
        ]
        _PULLS.validate_python(found)
        return 200, {}, found

    def _pull_news(self, seen: Seen, pulls_path: str) -> tuple[int, dict[str, str], Any] | None:
        """One pull request, its reviews or review comments, or a commit's check runs;
        None for any other path."""
        rest = seen.path.removeprefix(pulls_path + "/").split("/")
        if seen.path.startswith(pulls_path + "/") and rest[0].isdigit() and int(rest[0]) in self.pulls:
            number = int(rest[0])
            if len(rest) == 1 and not seen.query:
                PullRequest.model_validate(self.pulls[number])
                return 200, {}, self.pulls[number]
            if rest[1:] == ["reviews"] and set(seen.query) <= PAGE_PARAMS:
                body = self.reviews.get(number, [])
                _REVIEWS.validate_python(body)
                return 200, {}, body
            if rest[1:] == ["comments"] and set(seen.query) <= REVIEW_COMMENT_PARAMS:
                body = self.review_comments.get(number, [])
                _REVIEW_COMMENTS.validate_python(body)
                return 200, {}, body
            return self._problem(400, "Bad request", f"no scripted answer for {seen.path} {seen.query}")
        commits = f"/repos/{self.owner}/{self.name}/commits/"
        if seen.path.startswith(commits) and seen.path.endswith("/check-runs"):
            if not set(seen.query) <= CHECK_RUN_PARAMS:
                return self._problem(400, "Bad request", f"list check runs does not take {sorted(seen.query)}")
            runs = self.check_runs.get(seen.path.removeprefix(commits).removesuffix("/check-runs"), [])
            answer = {"total_count": len(runs), "check_runs": runs}
            ReposOwnerRepoCommitsRefCheckRunsGetResponse200.model_validate(answer)
            return 200, {}, answer
        return None

    def _create_pull(self, seen: Seen) -> tuple[int, dict[str, str], Any]:
        try:
            asked = ReposOwnerRepoPullsPostBody.model_validate(seen.body)
        except ValueError as err:
            return self._problem(422, "Validation Failed", f"create pull request: {err}")
        head, base = str(asked.head), str(asked.base)
        sha = self._remote_commit(head)
        if sha is None:
            return 422, {}, {"message": "Validation Failed", "errors": [{"field": "head", "code": "invalid"}]}
        if any(p["head"]["ref"] == head and p["state"] == "open" for p in self.pulls.values()):
            message = f"A pull request already exists for {self.owner}:{head}."
            return 422, {}, {"message": "Validation Failed", "errors": [{"code": "custom", "message": message}]}
        number = 100 + len(self.pulls) + len(self.issues)
        body = asked.body if isinstance(asked.body, str) else None
        pull = self.pull_json(number, str(asked.title), body, head, sha, base)
        self.pulls[number] = pull
        return 201, {}, pull

    def _remote_commit(self, branch: str) -> str | None:
        if self.remote is None:
            return None
        done = subprocess.run(
            ["git", "--git-dir", str(self.remote), "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout.strip() if done.returncode == 0 else None

    def repo_json(self) -> dict[str, Any]:
        """The repository (``Repository``) as the API serves it inside a pull request."""
        from githubkit_schemas.latest.models import Repository

        urls = {
            name: f"{self.repo_api}/{name.removesuffix('_url')}"
            for name, spec in Repository.model_fields.items()
            if spec.is_required() and name.endswith("url")
        }
        counts = ("forks", "forks_count", "stargazers_count", "watchers_count", "size", "open_issues_count")
        return {
            **urls,
            **dict.fromkeys((*counts, "open_issues", "watchers"), 0),
            "id": 42,
            "node_id": "R_42",
            "name": self.name,
            "full_name": f"{self.owner}/{self.name}",
            "license": None,
            "owner": user_json(self.owner, 2),
            "description": None,
            "fork": False,
            "homepage": None,
            "language": None,
            "default_branch": "main",
            "has_pages": False,
            "disabled": False,
            "mirror_url": None,
            "pushed_at": STAMP,
            "created_at": STAMP,
            "updated_at": STAMP,
        }

    def pull_json(self, number: int, title: str, body: str | None, head: str, sha: str, base: str) -> dict[str, Any]:
        """A pull request (``PullRequest``) as the API serves it; validated here."""
        api = f"{self.repo_api}/pulls/{number}"
        html = f"https://github.com/{self.owner}/{self.name}/pull/{number}"
        owner = user_json(self.owner, 2)

        def end(ref: str, commit: str) -> dict[str, Any]:
            return {"label": f"{self.owner}:{ref}", "ref": ref, "repo": self.repo_json(), "sha": commit, "user": owner}

        links = {
            name: {"href": f"{api}/{name}"}
            for name in ("comments", "commits", "statuses", "review_comments", "review_comment")
        }
        pull: dict[str, Any] = {
            "url": api,
            "id": 5000 + number,
            "node_id": f"PR_{number}",
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": f"{self.repo_api}/issues/{number}",
            "commits_url": f"{api}/commits",
            "review_comments_url": f"{api}/comments",
            "review_comment_url": f"{self.repo_api}/pulls/comments{{/number}}",
            "comments_url": f"{self.repo_api}/issues/{number}/comments",
            "statuses_url": f"{self.repo_api}/statuses/{sha}",
            "number": number,
            "state": "open",
            "locked": False,
            "title": title,
            "user": user_json("vigil-operator", 3),
            "body": body,
            "labels": [],
            "milestone": None,
            "created_at": STAMP,
            "updated_at": STAMP,
            "closed_at": None,
            "merged_at": None,
            "head": end(head, sha),
            "base": end(base, sha),
            "_links": {**links, "self": {"href": api}, "html": {"href": html}, "issue": {"href": api}},
            "author_association": "OWNER",
            "auto_merge": None,
            "merged": False,
            "mergeable": True,
            "mergeable_state": "clean",
            "merged_by": None,
            "comments": 0,
            "review_comments": 0,
            "maintainer_can_modify": False,
            "commits": 1,
            "additions": 1,
            "deletions": 1,
            "changed_files": 1,
        }
        PullRequest.model_validate(pull)
        return pull

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
        return 200, {}, body


@contextmanager
def github_server(
    owner: str = "octo", name: str = "demo", token: str = "ghp_scripted", remote: Path | None = None
) -> Iterator[GitHubServer]:
    """A running scripted API on 127.0.0.1, stopped on exit."""
    server_state = GitHubServer(owner, name, token, remote=remote)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            seen = Seen(
                self.command,
                url.path,
                parse_qs(url.query),
                {k.lower(): v for k, v in self.headers.items()},
                json.loads(raw) if raw else None,
            )
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
