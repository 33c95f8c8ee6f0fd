"""The ``github`` sensor's second half: what happens to the pull requests Vigil opened.

Each run lists the repository's open pull requests whose head branch is Vigil's
(``vigil/<task id>-…``, on the repository itself, not a fork) and keeps them in the
sensor's state (``pulls``: number → task id). For each one open:

- a review that requests changes, or comments with text, not seen before → the
  task back in the queue with the review and its line comments as a note, quoted
  as their authors' (the path of ``vigil task reject`` with a reason);
- failed check runs on the head commit, per check suite not seen before → the task
  back with each failed check's name, conclusion and GitHub's summary, at most
  ``max_ci_retries`` times per pull request; past that, recorded and not sent back.

While one of Vigil's pull requests is open, the issue it closes (``Closes #N`` in
the body Vigil wrote) queues no new task: its task is done, waiting for the merge.

Every request here is conditional, like the issue list's: the ``ETag`` of the
last answer to the list of open pull requests, to each one's reviews and to the
check runs on its head commit is kept in the state (``etags``) and sent back as
``If-None-Match``, so a quiet repository answers 304 throughout and costs no
rate limit. The state keeps what the list said (``open``: each of Vigil's open
pull requests, its task, head commit and the issues it closes) for a run whose
list is a 304.

A watched pull request no longer open is fetched once: merged or closed without a
merge is recorded on the task (an audit event and a note), nothing retried.

Why values and not writes: a sensor never writes the store. Each of these is a
``TaskFeedback`` the run reports (``SensorContext.report``); the runner applies
them in the transaction that stores the sensor's state, and the state keeps the
keys already reported (``review:<id>``, ``checks:<suite id>:<head sha>``), so a
poll that sees one twice does nothing twice and a crash cannot apply one twice or
lose one. The store applies an item only to the task whose pull request it names
(``vigil.store.feedback``), so a branch named like Vigil's on someone else's pull
request changes nothing. Keeping an approved task open until its pull request is
merged was the other design; it would have changed what an approval means for
every task and the TUI's review list, for no gain in safety.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sensors.api import SensorContext
from vigil.github import Repo, quoted
from vigil.models import TaskFeedback

if TYPE_CHECKING:
    from githubkit_schemas.latest.models import CheckRun, PullRequestReview, PullRequestReviewComment

VIGIL_BRANCH = re.compile(r"^vigil/(\d+)-")
CLOSES = re.compile(r"^Closes #(\d+)$", re.MULTILINE)
FAILED = frozenset({"failure", "timed_out", "cancelled", "action_required", "startup_failure"})
SENT_BACK_BY = frozenset({"CHANGES_REQUESTED", "COMMENTED"})
PER_PAGE = 100
MAX_SEEN = 2000  # keys remembered; the oldest go first
MAX_TEXT_CHARS = 5000  # of one review, comment or check summary


@dataclass(frozen=True)
class Watch:
    """What the sensor needs to know to read a pull request's news."""

    repo: Repo
    authors: frozenset[str] | None
    max_ci_retries: int


async def watch_pulls(gh: Any, watch: Watch, ctx: SensorContext) -> set[int]:
    """Report what changed on Vigil's pull requests since the last run (see the
    module); returns the issues its open pull requests close."""
    repo = watch.repo
    watching: dict[str, int] = ctx.state.setdefault("pulls", {})
    etags: dict[str, str] = ctx.state.setdefault("etags", {})
    listed = await _conditional(
        etags, "pulls", gh.rest.pulls.async_list, repo.owner, repo.name, state="open", per_page=PER_PAGE
    )
    if listed is not None:
        ctx.state["open"] = _open_pulls(repo, listed)
    open_now: dict[str, dict[str, Any]] = ctx.state.setdefault("open", {})
    for number_text, listed_pull in open_now.items():
        watching[number_text] = listed_pull["task"]
    closing = {issue for listed_pull in open_now.values() for issue in listed_pull["closes"]}
    for number_text, task_id in sorted(watching.items()):
        number = int(number_text)
        pull = open_now.get(number_text)
        if pull is not None:
            await _reviews(gh, watch, ctx, number, pull)
            await _checks(gh, watch, ctx, number, pull)
            continue
        full = (await gh.rest.pulls.async_get(repo.owner, repo.name, number)).parsed_data
        if full.state == "open":
            continue  # beyond the first page of open ones: still watched
        event = "merged" if full.merged else "closed"
        note = f"Pull request {repo}#{number} {'merged' if full.merged else 'closed without a merge'}: {full.html_url}"
        ctx.report(TaskFeedback(task_id, str(repo), number, event, note, send_back=False))
        del watching[number_text]
        ctx.state.get("ci_retries", {}).pop(number_text, None)
    # the ETags of what is still asked about: the list, and each open pull request's
    keep = {"pulls"} | {f"reviews:{n}" for n in open_now} | {f"checks:{n}:{p['sha']}" for n, p in open_now.items()}
    for key in set(etags) - keep:
        del etags[key]
    return closing


def _open_pulls(repo: Repo, listed: Any) -> dict[str, dict[str, Any]]:
    """Vigil's open pull requests in a list of them, as the state keeps them
    (by number: its task, head commit, address and the issues it closes)."""
    found: dict[str, dict[str, Any]] = {}
    for pull in listed:
        vigils = VIGIL_BRANCH.match(pull.head.ref)
        if vigils and pull.head.repo is not None and pull.head.repo.full_name == str(repo):
            found[str(pull.number)] = {
                "task": int(vigils.group(1)),
                "sha": pull.head.sha,
                "url": pull.html_url,
                "closes": sorted({int(n) for n in CLOSES.findall(pull.body or "")}),
            }
    return found


async def _conditional(etags: dict[str, str], key: str, call: Any, *args: Any, **kwargs: Any) -> Any | None:
    """``call``'s parsed answer, asked with the ETag of its last answer
    (``If-None-Match``); None when GitHub answers 304 Not Modified, which costs no
    rate limit. The new ETag goes into ``etags`` (the sensor's state): the caller
    acts on the answer in this same run, whose state commits with what it reports."""
    sent = etags.get(key)
    response = await call(*args, **kwargs, headers={"If-None-Match": sent} if sent else None)
    if response.status_code == 304:
        return None
    etag = response.headers.get("etag")
    if etag:
        etags[key] = etag
    else:
        etags.pop(key, None)
    return response.parsed_data


async def _reviews(gh: Any, watch: Watch, ctx: SensorContext, number: int, pull: dict[str, Any]) -> None:
    """Report each review of pull request ``number`` (``pull``: as the state keeps
    it) not seen before that asks for something."""
    repo, task_id = watch.repo, int(pull["task"])
    seen: list[str] = ctx.state.setdefault("seen", [])
    reviews = await _conditional(
        ctx.state["etags"], f"reviews:{number}", gh.rest.pulls.async_list_reviews,
        repo.owner, repo.name, number, per_page=PER_PAGE,
    )  # fmt: skip
    fresh = [r for r in reviews or () if f"review:{r.id}" not in seen]
    if not fresh:
        return
    comments = (
        await gh.rest.pulls.async_list_review_comments(repo.owner, repo.name, number, per_page=PER_PAGE)
    ).parsed_data
    for review in fresh:
        _remember(seen, f"review:{review.id}")
        own = [c for c in comments if c.pull_request_review_id == review.id]
        if review.state not in SENT_BACK_BY or not _trusted(watch, review.author_association):
            continue
        if review.state == "COMMENTED" and not (review.body or "").strip() and not own:
            continue
        event = "changes requested" if review.state == "CHANGES_REQUESTED" else "review comments"
        note = _review_note(repo, number, pull["url"], review, own)
        ctx.report(TaskFeedback(task_id, str(repo), number, event, note, send_back=True))


async def _checks(gh: Any, watch: Watch, ctx: SensorContext, number: int, pull: dict[str, Any]) -> None:
    """Report the check suites that failed on pull request ``number``'s head commit
    since the last run, as one item; past ``max_ci_retries`` for it, not sent back."""
    repo, sha, task_id = watch.repo, str(pull["sha"]), int(pull["task"])
    seen: list[str] = ctx.state.setdefault("seen", [])
    runs = await _conditional(
        ctx.state["etags"], f"checks:{number}:{sha}", gh.rest.checks.async_list_for_ref,
        repo.owner, repo.name, sha, per_page=PER_PAGE,
    )  # fmt: skip
    if runs is None:
        return  # 304: the same check runs as the last run saw
    failed = [r for r in runs.check_runs if r.status == "completed" and r.conclusion in FAILED]
    keys = {f"checks:{r.check_suite.id if r.check_suite else 0}:{sha}" for r in failed} - set(seen)
    if not keys:
        return
    for done in sorted(keys):
        _remember(seen, done)
    news = [r for r in failed if f"checks:{r.check_suite.id if r.check_suite else 0}:{sha}" in keys]
    retries: dict[str, int] = ctx.state.setdefault("ci_retries", {})
    spent = retries.get(str(number), 0)
    note = _checks_note(repo, number, sha, news)
    if spent >= watch.max_ci_retries:
        ctx.warn(f"{repo}#{number}: checks failed again; not sent back (max_ci_retries = {watch.max_ci_retries})")
        note += f"\n\nNot sent back: the checks have failed {spent} times already (max_ci_retries)."
        ctx.report(TaskFeedback(task_id, str(repo), number, "checks failed, not retried", note, send_back=False))
        return
    retries[str(number)] = spent + 1
    ctx.report(TaskFeedback(task_id, str(repo), number, "checks failed", note, send_back=True))


def _remember(seen: list[str], key: str) -> None:
    seen.append(key)
    del seen[:-MAX_SEEN]


def _trusted(watch: Watch, association: object) -> bool:
    return watch.authors is None or str(association or "NONE") in watch.authors


def _review_note(
    repo: Repo, number: int, url: str, review: PullRequestReview, comments: Iterable[PullRequestReviewComment]
) -> str:
    said = "requested changes" if review.state == "CHANGES_REQUESTED" else "commented"
    who = review.user.login if review.user else "ghost"
    association = review.author_association if isinstance(review.author_association, str) else None
    parts = [f"A review on pull request {repo}#{number} ({url}) {said}."]
    if (review.body or "").strip():
        parts.append(quoted(who, association, (review.body or "")[:MAX_TEXT_CHARS]))
    for comment in comments:
        line = comment.line or comment.original_line
        where = f"{comment.path}" + (f", line {line}" if line else "")
        author = comment.user.login if comment.user else who
        parts.append(f"On {where}: " + quoted(author, association, comment.body[:MAX_TEXT_CHARS]))
    parts.append("Address this; your next approved change goes to the same pull request.")
    return "\n\n".join(parts)


def _checks_note(repo: Repo, number: int, sha: str, runs: Iterable[CheckRun]) -> str:
    parts = [f"Checks failed on pull request {repo}#{number} at {sha[:12]}:"]
    for run in runs:
        summary = run.output.summary if run.output and isinstance(run.output.summary, str) else ""
        app = run.app.name if run.app else "a check"
        head = f"- {run.name}: {run.conclusion}"
        parts.append(head + ("\n" + quoted(app, None, summary[:MAX_TEXT_CHARS]) if summary.strip() else ""))
    return "\n\n".join(parts)
