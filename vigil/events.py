"""``vigil events``: the audit trail as a stream, in commit order, optionally followed.

Every state change of a task writes an audit row (``task_events``) in the same
transaction; this module reads them in id order through ``Store.events_after`` and
prints each as a line for people or a JSON object per line
(``vigil.render.event_line`` and ``event_record``). With ``follow`` it then waits
for more the way the TUI does: it probes ``Store.data_version`` (SQLite's ``PRAGMA
data_version``, a few µs; PostgreSQL's count of commit notifications, no round
trip) every ``poll_s`` and reads only when it moved, so an idle follower costs next
to nothing and never re-reads the table.

PostgreSQL hands out ids before commit, so a transaction that commits late can
add a row below an id already printed. A follower on PostgreSQL therefore reads
back ``lookback`` ids each time and prints only ids it has not printed yet.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from vigil.durations import is_duration, parse_duration_ms, parse_iso_ms
from vigil.errors import InputError
from vigil.models import TaskEvent
from vigil.store import Store

# What the audit triggers write (vigil.store.sqlite.schema, vigil.store.postgres.schema), then
# what behaviours write: an approval's merge, what a task's pull request said.
KINDS = ("created", "status", "priority", "scheduled", "approval", "cancel_requested", "merge", "github")
BATCH = 500  # rows per read
POLL_S = 0.2  # data_version probe interval while following, as the TUI's
POSTGRES_LOOKBACK = 1000  # ids read back on PostgreSQL (late commits); 0 on SQLite


def parse_since(text: str, now_ms: int) -> int:
    """``--since``: an ISO 8601 time, or a duration meaning "that long ago"."""
    if is_duration(text):
        return now_ms - parse_duration_ms(text)  # its error says what is wrong with it
    try:
        return parse_iso_ms(text)
    except InputError:
        raise InputError(f"--since: expected an ISO 8601 time or a duration such as 2h, got {text!r}") from None


def parse_kinds(values: Collection[str]) -> tuple[str, ...]:
    """``--kind`` values (repeatable, or comma-separated), checked against ``KINDS``."""
    kinds = tuple(dict.fromkeys(k.strip() for v in values for k in v.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise InputError(f"--kind: unknown kind {unknown[0]!r}; expected one of {', '.join(KINDS)}")
    return kinds


@dataclass(frozen=True)
class EventFilter:
    """What ``vigil events`` was asked for; None/empty: no filter."""

    since_ms: int | None = None
    task_id: int | None = None
    kinds: tuple[str, ...] = ()
    after_id: int = 0  # only events with a higher id (a follower picking up again)


async def stream_events(
    store: Store,
    wanted: EventFilter,
    emit: Callable[[TaskEvent], Awaitable[None] | None],
    *,
    follow: bool,
    lookback: int = 0,
    poll_s: float = POLL_S,
    read_every_s: float | None = None,
) -> None:
    """Emit every matching event in id order; with ``follow``, then every new one as
    it commits, until cancelled (Ctrl-C) or ``emit`` raises (a closed pipe).
    ``emit`` may be a coroutine function: it is awaited, one event at a time.

    ``read_every_s`` also reads that often whatever ``data_version`` says: a store
    shared with a writer in the same process (the daemon's) does not see its own
    commits move it. None: only after another process's commit."""
    high = wanted.after_id  # the highest id emitted
    seen: set[int] = set()  # ids emitted within the lookback window (PostgreSQL)

    async def drain() -> None:
        nonlocal high
        after = max(high - lookback, wanted.after_id)
        while True:
            batch = await store.events_after(
                after, since_ms=wanted.since_ms, task_id=wanted.task_id, kinds=wanted.kinds, limit=BATCH
            )
            for event in batch:
                if event.id in seen or (not lookback and event.id <= high):
                    continue
                emitted = emit(event)
                if inspect.isawaitable(emitted):
                    await emitted
                high = max(high, event.id)
                if lookback:
                    seen.add(event.id)
            if len(batch) < BATCH:
                break
            after = batch[-1].id
        if lookback:
            seen.difference_update([i for i in seen if i <= high - lookback])

    version = await store.data_version() if follow else None
    await drain()
    loop = asyncio.get_running_loop()
    read_at = None if read_every_s is None else loop.time() + read_every_s
    while follow:
        await asyncio.sleep(poll_s)
        current = await store.data_version()
        due = read_at is not None and loop.time() >= read_at
        if current != version or due:
            version = current
            await drain()
            if read_every_s is not None:
                read_at = loop.time() + read_every_s
