"""``github``: open issues of one repository that carry the given labels become tasks.

Options: ``repo`` (required, ``owner/name``), ``labels`` (default ``["vigil"]``; an
issue must carry all of them), ``assignee`` (a login, ``none`` or ``*``; default: any),
``authors`` (author associations to take issues from, e.g. ``["owner", "member",
"collaborator"]``; default: anyone who can get the labels on, which on GitHub takes
triage rights), ``token_env`` (default ``GITHUB_TOKEN``; else ``gh auth token``),
``api_url`` (default ``https://api.github.com``; GitHub Enterprise and tests),
``max_ci_retries`` (default 3: how many times failed checks on one pull request
send its task back).

One task per issue, keyed ``owner/name#N`` (scope ``open``: an issue closed and
reopened can queue again once its task has finished); subject the issue's title,
description its URL and its body quoted as its author's (``vigil.github.quoted``).
Pull requests, which GitHub lists among issues, are left out.

Polling is conditional: the first page's ``ETag`` is kept in the sensor's state and
sent back as ``If-None-Match``, so an unchanged repository answers 304 and costs no
rate limit. Issues are listed most recently updated first, so any change to any
matching issue changes that first page. A rate-limit answer (403/429 with
``x-ratelimit-reset`` or ``retry-after``) is not a failure: the reset time is kept in
the state, and until then a run asks GitHub nothing and says when it will (the run's
text in ``vigil sensors``). Any other error is the run's failure.

The same run watches the pull requests Vigil opened and reports their reviews,
failed checks, merge or close on their tasks: ``sensors.builtin.pull_feedback``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sensors.api import FoundTask, SensorContext, sensor
from sensors.builtin.pull_feedback import Watch, watch_pulls
from sensors.options import OptionReader
from vigil.errors import GitHubError, InputError
from vigil.github import ASSOCIATIONS, DEFAULT_API_URL, DEFAULT_TOKEN_ENV, Repo, client, quoted, token
from vigil.models import GitHubLink

if TYPE_CHECKING:
    from githubkit_schemas.latest.models import Issue

PER_PAGE = 100
MAX_BODY_CHARS = 20_000
MAX_SUBJECT_CHARS = 300


@dataclass(frozen=True)
class GitHubOptions:
    repo: Repo
    labels: tuple[str, ...]
    assignee: str | None
    authors: frozenset[str] | None
    token_env: str
    api_url: str
    max_ci_retries: int = 3


def parse_options(raw: Mapping[str, Any], home: Path) -> GitHubOptions:
    reader = OptionReader(raw, home)
    try:
        repo = Repo.parse(reader.str_("repo"))
    except InputError as err:
        raise ValueError(f"repo: {err}") from None
    labels = reader.strings("labels", ("vigil",))
    assignee = reader.str_("assignee", "")
    authors = reader.strings("authors") or None
    if authors is not None:
        unknown = sorted({a.upper() for a in authors} - set(ASSOCIATIONS))
        if unknown:
            raise ValueError(f"authors: unknown association {unknown[0]!r}; expected some of {', '.join(ASSOCIATIONS)}")
    api_url = reader.str_("api_url", DEFAULT_API_URL).rstrip("/")
    if not api_url.startswith(("http://", "https://")):
        raise ValueError(f"api_url: expected http:// or https://, got {api_url!r}")
    options = GitHubOptions(
        repo=repo,
        labels=labels,
        assignee=assignee or None,
        authors=None if authors is None else frozenset(a.upper() for a in authors),
        token_env=reader.str_("token_env", DEFAULT_TOKEN_ENV),
        api_url=api_url,
        max_ci_retries=reader.int_("max_ci_retries", 3),
    )
    reader.done()
    return options


@sensor(every="2m", options=parse_options)
async def github(ctx: SensorContext) -> list[FoundTask]:
    """Labelled GitHub issues become tasks."""
    from githubkit.exception import RateLimitExceeded, RequestFailed

    opts = parse_options(ctx.options, ctx.home)
    now = ctx.clock.now_ms()
    until = ctx.state.get("rate_limited_until")
    if isinstance(until, int) and now < until:
        ctx.warn(f"GitHub's rate limit: waiting until {_when(until)}")
        return []
    ctx.state.pop("rate_limited_until", None)
    secret = await asyncio.to_thread(token, opts.token_env)
    etag = ctx.state.get("etag")
    try:
        async with client(secret, opts.api_url) as gh:
            issues, new_etag, complete = await _open_issues(gh, opts, etag if isinstance(etag, str) else None, ctx)
            closing = await watch_pulls(gh, Watch(opts.repo, opts.authors, opts.max_ci_retries), ctx)
    except RateLimitExceeded as err:
        ctx.state["rate_limited_until"] = _reset_at(err, now)
        ctx.warn(f"GitHub's rate limit: waiting until {_when(ctx.state['rate_limited_until'])}")
        return []
    except RequestFailed as err:
        raise GitHubError(f"GitHub answered HTTP {err.response.status_code} for {opts.repo}") from None
    if issues is None:
        return []  # 304: nothing changed since the ETag we hold
    # An issue whose pull request is open has had its task: it waits for the merge.
    tasks = [_task(opts, issue) for issue in issues if _wanted(opts, issue) and issue.number not in closing]
    if complete and new_etag is not None:
        ctx.state["etag"] = new_etag
    else:
        ctx.state.pop("etag", None)  # a partial read must not make the next poll a 304
    return tasks


async def _open_issues(
    gh: Any, opts: GitHubOptions, etag: str | None, ctx: SensorContext
) -> tuple[list[Issue] | None, str | None, bool]:
    """The open issues with the labels (None when GitHub answers 304 to ``etag``), the
    first page's ETag, and whether every page was read (False: cut at the run's cap)."""
    issues: list[Issue] = []
    page, first_etag = 1, None
    while True:
        headers = {"If-None-Match": etag} if page == 1 and etag else None
        response = await gh.rest.issues.async_list_for_repo(
            opts.repo.owner,
            opts.repo.name,
            state="open",
            sort="updated",
            direction="desc",
            per_page=PER_PAGE,
            page=page,
            **({"labels": ",".join(opts.labels)} if opts.labels else {}),
            **({"assignee": opts.assignee} if opts.assignee else {}),
            headers=headers,
        )
        if response.status_code == 304:
            return None, etag, True
        if page == 1:
            first_etag = response.headers.get("etag")
        batch: list[Issue] = response.parsed_data
        issues.extend(batch)
        if len(batch) < PER_PAGE:
            return issues, first_etag, True
        if len(issues) >= ctx.max_tasks:
            return issues, first_etag, False
        page += 1


def _wanted(opts: GitHubOptions, issue: Issue) -> bool:
    if issue.pull_request:
        return False  # GitHub lists pull requests among issues
    if opts.authors is None:
        return True
    return str(issue.author_association or "NONE") in opts.authors


def _task(opts: GitHubOptions, issue: Issue) -> FoundTask:
    author = issue.user.login if issue.user else "ghost"
    association = issue.author_association if isinstance(issue.author_association, str) else None
    body = (issue.body if isinstance(issue.body, str) else "")[:MAX_BODY_CHARS]
    description = f"GitHub issue {opts.repo}#{issue.number}: {issue.html_url}\n\n" + quoted(
        author, association, body or "(no description)"
    )
    return FoundTask(
        key=f"{opts.repo}#{issue.number}",
        subject=" ".join(issue.title.split())[:MAX_SUBJECT_CHARS] or f"{opts.repo}#{issue.number}",
        description=description,
        github=GitHubLink(repo=str(opts.repo), issue=issue.number, issue_url=issue.html_url),
    )


def _reset_at(err: Any, now_ms: int) -> int:
    """When GitHub will answer again, epoch ms: its ``x-ratelimit-reset`` (epoch
    seconds) when given, else now plus the wait githubkit read from the answer."""
    reset = err.response.headers.get("x-ratelimit-reset")
    if "retry-after" not in err.response.headers and reset is not None and reset.isdigit():
        return max(int(reset) * 1000, now_ms)
    return now_ms + int(err.retry_after.total_seconds() * 1000)


def _when(epoch_ms: int) -> str:
    return dt.datetime.fromtimestamp(epoch_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
