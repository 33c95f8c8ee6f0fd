"""SQLite's errors as ``vigil.errors`` types: the one place the driver's errors are
translated (``translate``), with what a person can do about each.

SQLite says "disk I/O error" whatever broke, and a full disk, a read-only file, a
read-only mount, a file-size limit and a deleted write-ahead log each need a
different remedy: ``translate`` looks at the files to tell which (``_io_hint``).
"""

from __future__ import annotations

import errno
import os
import resource
import sqlite3
import struct
from pathlib import Path

from vigil.errors import DuplicateOpenTask, InputError, NotADatabase, StoreBusy, StoreError, VigilError


def is_busy(err: sqlite3.OperationalError) -> bool:
    code = getattr(err, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(err) or "busy" in str(err)


def translate(err: sqlite3.Error, path: Path) -> VigilError:
    """The ``vigil.errors`` type for a driver error (the only translation point).

    A constraint failure is bad input (the transaction was rolled back, nothing
    changed): the open-scope source-key index → ``DuplicateOpenTask``, any other
    → ``InputError`` naming the constraint.
    """
    if isinstance(err, sqlite3.IntegrityError):
        if "tasks.source_key" in str(err):
            return DuplicateOpenTask("another open task already has this source key")
        return InputError(f"the database refused the change: {err}")
    if isinstance(err, sqlite3.DatabaseError) and "file is not a database" in str(err):
        return NotADatabase(f"{path} is not a Vigil database (file is not a database)")
    if isinstance(err, sqlite3.OperationalError) and is_busy(err):
        return StoreBusy(f"{path} stayed locked by another process; try again")
    code = (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN) and _read_only_mount(path):
        # an agent's sandbox mounts the home read-only: say so plainly (its executor
        # records a "Read-only file system" in a command's output as a denial)
        return StoreError(f"{path}: Read-only file system: the database cannot be written from here; nothing changed")
    hint = _io_hint(path) if code == sqlite3.SQLITE_IOERR else _HINTS.get(code)
    return StoreError(f"{path}: {err}" + (f" ({hint})" if hint else ""))


def _read_only_mount(path: Path) -> bool:
    """Whether the database's folder is on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False


# What a person can do about the errors a machine, not Vigil, causes. A failed write
# was rolled back, so each hint can say nothing of the change was stored.
_HINTS = {
    sqlite3.SQLITE_READONLY: "the file or its folder is read-only; nothing was changed",
    sqlite3.SQLITE_CANTOPEN: "the file and its folder must be readable and writable: SQLite keeps its -wal "
    "and -shm files beside the database",
    sqlite3.SQLITE_FULL: "the disk is full; nothing of this change was stored",
}
WAL_HEADER_BYTES = 32
WAL_FRAME_HEADER_BYTES = 24
NEARLY_FULL_BYTES = 1024 * 1024  # free space below which a failed write is put down to a full disk


def _io_hint(path: Path) -> str:
    """Why a read or write of ``path`` failed with an I/O error, found by looking:
    SQLite says only "disk I/O error", whatever the cause, and each cause needs a
    different remedy."""
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if _log_cut_short(wal, shm):
        return (
            f"its write-ahead log {wal.name} is missing while {shm.name} says it holds changes: it was deleted "
            "while a process had the database open. Stop every Vigil process cleanly (the last one to close "
            "writes the log back into the database), then try again; nothing of this change was stored"
        )
    try:
        space: os.statvfs_result | None = os.statvfs(path.parent)
    except OSError:
        space = None
    if space is not None and space.f_flag & os.ST_RDONLY:
        return f"the filesystem holding {path.parent} is mounted read-only; nothing was changed"
    for file in (path, wal, shm):
        if not _writable(file):
            return f"{file.name} is read-only (or immutable); nothing was changed"
    if space is not None and space.f_bavail * space.f_frsize < NEARLY_FULL_BYTES:
        return "the disk is full; nothing of this change was stored"
    if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY:
        return "the write failed, perhaps at the file-size limit (ulimit -f); nothing of this change was stored"
    return "the read or write failed in the filesystem or the disk; nothing of this change was stored"


def _log_cut_short(wal: Path, shm: Path) -> bool:
    """Whether the shared-memory index says the write-ahead log holds more frames
    than its file does: the log was deleted (and begun again empty by the next
    opener) while a process had the database open. The index's header (SQLite's
    file format, *WAL-index format*): page size as a u16 at byte 14 (1: 65536), the
    last valid frame as a u32 at byte 16, in the machine's byte order."""
    try:
        with shm.open("rb") as index:
            header = index.read(20)
        size = wal.stat().st_size if wal.exists() else 0
    except OSError:
        return False
    if len(header) < 20:
        return False
    page_size, frames = (int(v) for v in struct.unpack_from("=HI", header, 14))
    page_size = 65536 if page_size == 1 else page_size
    return frames > 0 and size < WAL_HEADER_BYTES + frames * (WAL_FRAME_HEADER_BYTES + page_size)


def _writable(file: Path) -> bool:
    """False when ``file`` exists but cannot be opened for writing (its mode, an
    immutable flag that even root obeys, a read-only mount)."""
    try:
        fd = os.open(file, os.O_WRONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    except OSError as err:
        return err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS)
    os.close(fd)
    return True
