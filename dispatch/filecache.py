"""Files read and parsed once, and again only when they change on disk.

The dispatcher reads the same few files for every task (the identity file, the
skills a task names, and the guard reads those skills again for approval). Parsing
a skill's YAML on each of those reads costs more than the whole claim; a ``stat``
per read is enough to notice an edit.

A file counts as changed when its modification time, change time, size or inode
differ from the last read. Editors that save by renaming give a new inode; an
in-place rewrite moves the times. Only a same-size rewrite within the file system's
timestamp granularity (nanoseconds on ext4 and xfs) can go unnoticed until the next
change.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")

Signature = tuple[int, int, int, int]  # (mtime ns, ctime ns, size, inode)


def _signature(path: Path) -> Signature:
    stat = os.stat(path)
    return (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino)


class FileCache(Generic[T]):
    """``load(path)`` returns ``parse(path, text)`` of the file, parsed again only when the
    file changed since the last successful load. Errors (a missing file, an
    undecodable one, ``parse`` raising) propagate as reading would raise them and
    are never cached. Keeps the ``max_files`` most recently loaded files."""

    def __init__(self, parse: Callable[[Path, str], T], *, encoding: str = "utf-8", max_files: int = 256) -> None:
        self._parse = parse
        self._encoding = encoding
        self._max_files = max_files
        self._entries: OrderedDict[Path, tuple[Signature, T]] = OrderedDict()

    def load(self, path: Path) -> T:
        signature = _signature(path)
        entry = self._entries.get(path)
        if entry is not None and entry[0] == signature:
            self._entries.move_to_end(path)
            return entry[1]
        # Stat before reading: a change during the read makes the next load read again.
        value = self._parse(path, path.read_text(encoding=self._encoding))
        self._entries[path] = (signature, value)
        self._entries.move_to_end(path)
        if len(self._entries) > self._max_files:
            self._entries.popitem(last=False)
        return value
