"""``feed``: new RSS/Atom entries become tasks (parsed with feedparser).

Options: ``url`` (required), ``max_bytes`` (default 5 MiB), ``ignore_first``
(default true: the first run marks the current entries as seen), ``max_seen``
(default 1000 entry ids remembered).

The cursor in state is the set of entry ids already seen (an entry's ``id``, else
its link, else its title), plus the ``ETag``/``Last-Modified`` of the last response,
sent back so an unchanged feed costs a 304. Each entry's key is its id with scope
``ever``, so an entry is a task once even if the cursor is lost. A feed that cannot
be parsed, or a server that is down, is a sensor error, not a task.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sensors.api import FoundTask, SensorContext, sensor
from sensors.builtin.fetch import fetch_capped
from sensors.options import OptionReader
from vigil.models import DedupScope

MAX_KEY_CHARS = 200
MAX_SUMMARY_CHARS = 4000


@dataclass(frozen=True)
class FeedOptions:
    url: str
    max_bytes: int
    ignore_first: bool
    max_seen: int


class NotAFeed(ValueError):
    """The response is not RSS or Atom."""


def parse_options(raw: Mapping[str, Any], home: Path) -> FeedOptions:
    reader = OptionReader(raw, home)
    url = reader.str_("url")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"url: expected http:// or https://, got {url!r}")
    options = FeedOptions(
        url, reader.int_("max_bytes", 5 << 20, 1), reader.bool_("ignore_first", True), reader.int_("max_seen", 1000, 1)
    )
    reader.done()
    return options


def _entry_id(entry: Mapping[str, Any]) -> str | None:
    for field in ("id", "link", "title"):
        value = entry.get(field)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _key(entry_id: str) -> str:
    if len(entry_id) <= MAX_KEY_CHARS:
        return entry_id
    return hashlib.sha256(entry_id.encode()).hexdigest()


@sensor(every="15m", options=parse_options)
async def feed(ctx: SensorContext) -> list[FoundTask]:
    """New RSS/Atom entries become tasks."""
    import feedparser  # heavy; only sensors that read feeds pay for it

    opts = parse_options(ctx.options, ctx.home)
    headers = {}
    if isinstance(ctx.state.get("etag"), str):
        headers["If-None-Match"] = ctx.state["etag"]
    if isinstance(ctx.state.get("modified"), str):
        headers["If-Modified-Since"] = ctx.state["modified"]
    got = await fetch_capped(ctx.http, opts.url, max_bytes=opts.max_bytes, headers=headers)
    if got.status == 304:
        return []
    if got.status >= 400:
        raise NotAFeed(f"{opts.url} answered HTTP {got.status}")
    parsed = feedparser.parse(got.body)
    if not parsed.entries and (parsed.bozo or "title" not in parsed.feed):
        reason = getattr(parsed, "bozo_exception", None) or "no feed title and no entries"
        raise NotAFeed(f"{opts.url} is not an RSS/Atom feed: {reason}")
    first_run = "seen" not in ctx.state
    seen: list[str] = [s for s in ctx.state.get("seen", []) if isinstance(s, str)]
    known = set(seen)
    title = parsed.feed.get("title", opts.url)
    tasks: list[FoundTask] = []
    complete = True
    for entry in reversed(parsed.entries):  # feeds list newest first; queue oldest first
        entry_id = _entry_id(entry)
        if entry_id is None or entry_id in known:
            continue
        if len(tasks) >= ctx.max_tasks:
            complete = False  # the rest stays unseen for the next run
            break
        known.add(entry_id)
        seen.append(entry_id)
        if first_run and opts.ignore_first:
            continue
        summary = str(entry.get("summary", ""))[:MAX_SUMMARY_CHARS]
        link = entry.get("link", "")
        tasks.append(
            FoundTask(
                key=_key(entry_id),
                subject=f"{title}: {entry.get('title') or entry_id}"[:300],
                description=f"Feed: {opts.url}\nLink: {link}\n\n{summary}",
                dedup=DedupScope.EVER,
            )
        )
    ctx.state["seen"] = seen[-opts.max_seen :]
    for header, field in (("etag", "etag"), ("last-modified", "modified")):
        if complete and header in got.headers:
            ctx.state[field] = got.headers[header]
    return tasks
