"""``http``: watch a URL; a change of status code or content becomes a task.

Options: ``url`` (required), ``headers`` (a table), ``max_bytes`` (default 1 MiB; a
larger body is an error, read no further than the cap), ``ignore_first`` (default
true: the first run only records what it sees).

The state holds the last status and the SHA-256 of the body. A change produces one
task, keyed by the new status and hash (scope ``open``: while that task is open the
same content does not produce another). A connection error, timeout or oversized
body is a sensor error (visible in ``vigil sensors list``), not a task.
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

PREVIEW_CHARS = 2000


@dataclass(frozen=True)
class HttpOptions:
    url: str
    headers: dict[str, str]
    max_bytes: int
    ignore_first: bool


def parse_options(raw: Mapping[str, Any], home: Path) -> HttpOptions:
    reader = OptionReader(raw, home)
    url = reader.str_("url")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"url: expected http:// or https://, got {url!r}")
    options = HttpOptions(
        url, reader.str_map("headers"), reader.int_("max_bytes", 1 << 20, 1), reader.bool_("ignore_first", True)
    )
    reader.done()
    return options


@sensor(every="5m", options=parse_options)
async def http(ctx: SensorContext) -> list[FoundTask]:
    """A change of a URL's status or content becomes a task."""
    opts = parse_options(ctx.options, ctx.home)
    got = await fetch_capped(ctx.http, opts.url, max_bytes=opts.max_bytes, headers=opts.headers)
    digest = hashlib.sha256(got.body).hexdigest()
    before_status, before_hash = ctx.state.get("status"), ctx.state.get("sha256")
    ctx.state.update(status=got.status, sha256=digest)
    if before_hash is None and opts.ignore_first:
        return []
    if before_status == got.status and before_hash == digest:
        return []
    if before_status != got.status:
        subject = f"{opts.url} answered {got.status} (was {before_status or 'unknown'})"
    else:
        subject = f"{opts.url} changed"
    preview = got.body[:PREVIEW_CHARS].decode("utf-8", errors="replace")
    description = (
        f"URL: {opts.url}\nStatus: {before_status} → {got.status}\n"
        f"Content SHA-256: {before_hash} → {digest} ({len(got.body)} bytes)\n\n"
        f"First {PREVIEW_CHARS} characters:\n{preview}"
    )
    return [FoundTask(key=f"{got.status}:{digest[:16]}", subject=subject, description=description)]
