"""``inbox``: each file dropped in a folder becomes a task, then moves to ``done/``.

Options: ``path`` (default ``inbox``, relative to the home), ``done`` (default
``<path>/done``; both are created when missing), ``settle`` (default ``5s``), ``max_bytes`` (default 64 KiB, the
most text taken into the description).

The first line of a text file is the subject (at most 200 characters), the whole
text (up to ``max_bytes``, marked when cut) the description. A binary file (a NUL
byte, or not UTF-8) or an empty one becomes a task that names the file and its size;
its content is not read into the queue.

Files still being written are never read half-way: hidden files (``.name``) and
names ending in ``.tmp``, ``.part``, ``.partial``, ``.swp`` or ``~`` are ignored, as
is a file modified less than ``settle`` ago. Writers should write to such a name and
rename the file into place; slow copies are covered by ``settle``. A file is moved to
``done/`` only after its task is committed (a name already there gets a ``-1``,
``-2`` … suffix); if the process dies in between, the next run finds it again and
its key (name, size, modification time; scope ``ever``) keeps it from becoming a
second task. A file that vanishes while being read is skipped.
"""

from __future__ import annotations

import codecs
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sensors.api import FoundTask, SensorContext, sensor
from sensors.options import OptionReader
from vigil.models import DedupScope

IN_PROGRESS_SUFFIXES = (".tmp", ".part", ".partial", ".swp", "~", ".crdownload")
MAX_SUBJECT_CHARS = 200


@dataclass(frozen=True)
class InboxOptions:
    path: Path
    done: Path
    settle_ms: int
    max_bytes: int


def parse_options(raw: Mapping[str, Any], home: Path) -> InboxOptions:
    reader = OptionReader(raw, home)
    path = reader.path("path", "inbox")
    done = reader.path("done", str(path / "done"))
    options = InboxOptions(path, done, reader.duration_ms("settle", 5000), reader.int_("max_bytes", 65536, 1))
    reader.done()
    return options


def _is_candidate(entry: os.DirEntry[str], now_s: float, settle_ms: int) -> bool:
    name = entry.name
    if name.startswith(".") or name.endswith(IN_PROGRESS_SUFFIXES):
        return False
    try:
        if not entry.is_file(follow_symlinks=False):
            return False
        # The file system's own clock, not the injectable one: mtimes are wall time.
        return (now_s - entry.stat(follow_symlinks=False).st_mtime) * 1000 >= settle_ms
    except FileNotFoundError:
        return False


def _read_head(path: Path, max_bytes: int) -> tuple[bytes, os.stat_result] | None:
    """Up to ``max_bytes + 1`` bytes (the extra one tells "cut"), and the stat taken
    on the open file; None if the file vanished."""
    try:
        with path.open("rb") as handle:
            stat = os.fstat(handle.fileno())
            return handle.read(max_bytes + 1), stat
    except FileNotFoundError:
        return None


def _decode(head: bytes, cut: bool) -> str | None:
    """The text, or None for a binary file. A cut may split a UTF-8 sequence."""
    if b"\0" in head:
        return None
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        return decoder.decode(head, final=not cut)
    except UnicodeDecodeError:
        return None


def human_size(n: int) -> str:
    """``532 bytes``, ``1.5 KiB``, ``5.0 GiB``."""
    if n < 1024:
        return f"{n} bytes"
    value = float(n) / 1024
    units = ["KiB", "MiB", "GiB"]
    while value >= 1024 and len(units) > 1:
        value /= 1024
        units.pop(0)
    return f"{value:.1f} {units[0]}"


def _task(path: Path, head: bytes, stat: os.stat_result, max_bytes: int) -> FoundTask:
    key = f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}"
    cut = len(head) > max_bytes
    body = head[:max_bytes]
    text = _decode(body, cut)
    where = f"(dropped in the inbox as {path.name}; moved to its done folder)"
    if text is None:
        return FoundTask(
            key=key,
            subject=f"Binary file in inbox: {path.name} ({human_size(stat.st_size)})",
            description=f"A binary file was dropped in the inbox; its content was not read.\n\n{where}",
            dedup=DedupScope.EVER,
        )
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        subject = f"Inbox file {path.name} (empty)"
    else:
        subject = first if len(first) <= MAX_SUBJECT_CHARS else first[: MAX_SUBJECT_CHARS - 1] + "…"
    note = f"\n\n[cut: first {max_bytes} bytes of {human_size(stat.st_size)}]" if cut else ""
    return FoundTask(key=key, subject=subject, description=f"{text}{note}\n\n{where}", dedup=DedupScope.EVER)


def move_to_done(path: Path, done: Path) -> Path | None:
    """Move ``path`` into ``done`` without overwriting; None if it vanished."""
    done.mkdir(parents=True, exist_ok=True)
    target = done / path.name
    n = 0
    while target.exists():
        n += 1
        target = done / f"{path.stem}-{n}{path.suffix}"
    try:
        shutil.move(path, target)
    except FileNotFoundError:
        return None
    return target


@sensor(every="30s", options=parse_options)
async def inbox(ctx: SensorContext) -> list[FoundTask]:
    """Each file dropped in a folder becomes a task."""
    opts = parse_options(ctx.options, ctx.home)
    opts.path.mkdir(parents=True, exist_ok=True)  # a new home has no inbox yet
    now_s = time.time()
    with os.scandir(opts.path) as entries:
        ready = [Path(e.path) for e in entries if _is_candidate(e, now_s, opts.settle_ms)]
    ready.sort(key=lambda p: p.name)
    tasks: list[FoundTask] = []
    taken: list[Path] = []
    for path in ready[: ctx.max_tasks]:  # the rest waits for the next run
        read = _read_head(path, opts.max_bytes)
        if read is None:
            ctx.log.info("%s vanished before it was read", path.name)
            continue
        head, stat = read
        tasks.append(_task(path, head, stat, opts.max_bytes))
        taken.append(path)

    def move_all() -> None:
        for path in taken:
            if move_to_done(path, opts.done) is None:
                ctx.log.info("%s vanished before it was moved", path.name)

    ctx.after_commit(move_all)
    return tasks
