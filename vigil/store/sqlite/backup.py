"""Copies of the SQLite file: ``vigil backup`` writes one, ``vigil restore`` puts one back.

A backup is made with SQLite's online backup API under a temporary name beside the
target, ``<name>.vigil-partial``, synced and renamed into place only when complete:
a backup cut short never leaves a half copy under the name a person will restore
from. The temporary file is locked (``flock``) while it is written; one left by a
killed backup is no longer locked, and the next backup into that folder removes it.

A restore swaps the home's database for a verified copy of a backup, and keeps the
file it replaces. Swapping the file under an open connection corrupts it: SQLite
names the write-ahead log after the path, so a process still on the old file would
log its writes beside the new one, and the next opener replays them onto it. So
``restore_file`` refuses while any process has the database open, in two ways: it
names the processes it can see (``/proc``), and it takes the database out of WAL
mode, which SQLite allows only when no other connection has it open; that also
writes the log back into the old file and removes it. Then, holding an exclusive
lock, it links the old file to its kept name and renames the copy into place: no
moment without a database under the path. A process that opened the path just
before the swap is stopped by the check in ``sqlite.db.Connection.open``.
The dispatcher lanes are the caller's (the CLI's) to hold around it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from vigil.errors import InputError, NotADatabase, OperationError, SchemaTooNew, StoreError
from vigil.faults import crash_point
from vigil.store.sqlite.schema import check_openable

BACKUP_STEP_PAGES = 1024  # 4 MiB of 4 KiB pages per step; the connection's other users wait at most one step
PARTIAL_SUFFIX = ".vigil-partial"
RESTORING_SUFFIX = ".restoring"
SIDE_FILES = ("-wal", "-shm", "-journal")


def write_backup(conn: sqlite3.Connection, target: Path) -> list[Path]:
    """Copy the database of ``conn`` to ``target`` (see the module docstring);
    returns the partial files of killed backups it removed from the folder.

    Raises ``InputError`` when the folder does not exist or ``target`` is not an
    SQLite file (only an older backup may be overwritten), ``OperationError`` when
    another backup to ``target`` is being written; ``sqlite3.Error`` and ``OSError``
    as the copy meets them (the caller names both files)."""
    folder = target.parent
    if not folder.exists():  # (a file there fails below, as any other unwritable place)
        raise InputError(f"cannot back up to {target}: the folder {folder} does not exist; create it first")
    if target.exists():
        # replacing a folder or another program's file would lose it: only an
        # SQLite file (an older backup) may be overwritten
        probe = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
        try:
            probe.execute("PRAGMA schema_version").fetchone()
        finally:
            probe.close()
    removed = remove_dead_partials(folder)
    partial = folder / f"{target.name}{PARTIAL_SUFFIX}"
    fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OperationError(f"another backup to {target} is being written; try again later") from None
        try:
            os.ftruncate(fd, 0)
            _copy(conn, partial)
            os.fsync(fd)
            os.replace(partial, target)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    finally:
        os.close(fd)  # releases the lock
    return removed


def _copy(source: sqlite3.Connection, path: Path) -> None:
    dest = sqlite3.connect(path)
    try:
        # No rollback journal beside the copy: until it is renamed it is nothing but a
        # partial file, which a killed copy leaves alone, without a journal of its own.
        dest.execute("PRAGMA journal_mode = OFF")
        source.backup(dest, pages=BACKUP_STEP_PAGES, progress=lambda *_: crash_point("during-backup"))
    finally:
        dest.close()


def remove_dead_partials(folder: Path) -> list[Path]:
    """Remove the partial files in ``folder`` that no backup is writing (their writer
    was killed); returns them. One being written is locked and stays."""
    removed = []
    for partial in sorted(folder.glob(f"*{PARTIAL_SUFFIX}")):
        try:
            fd = os.open(partial, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        else:
            partial.unlink(missing_ok=True)
            removed.append(partial)
        finally:
            os.close(fd)
    return removed


@dataclass(frozen=True)
class Restored:
    """What ``restore_file`` did. ``kept``: where the replaced file now is (None: there
    was no database to replace); ``tasks``: how many tasks the restored file holds."""

    database: Path
    kept: Path | None
    tasks: int


def restore_file(database: Path, backup: Path, now_ms: int) -> Restored:
    """Put a verified copy of ``backup`` in place of ``database``, keeping the
    replaced file as ``<name>.replaced-<UTC time>`` (with its ``-wal`` if SQLite
    could not fold it in). Atomic: the path always names a whole database, the old
    one or the new one.

    Raises ``InputError`` (nothing changed) for a backup that is missing, not a Vigil
    database, from a newer Vigil, or fails SQLite's integrity check; and while
    another process has the database open (naming the ones it can see)."""
    tasks = _verify(backup)
    if database.exists() and database.resolve() == backup.resolve():
        raise InputError(f"{backup} is the database itself; give the path of a backup")
    copy = database.with_name(database.name + RESTORING_SUFFIX)
    try:
        _fresh_private(copy)
        try:
            source = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
            try:
                _copy(source, copy)
            finally:
                source.close()
            _sync(copy)
            kept = _swap(database, copy, now_ms)
        finally:
            copy.unlink(missing_ok=True)
    except OSError as err:
        raise StoreError(f"cannot restore {database}: {err.strerror or err}; it was not replaced") from None
    except sqlite3.Error as err:
        raise StoreError(f"cannot restore {database} from {backup}: {err}; it was not replaced") from None
    return Restored(database, kept, tasks)


def _verify(backup: Path) -> int:
    """The number of tasks in ``backup``; raises ``InputError`` unless it is a whole
    Vigil database this Vigil can open."""
    if not backup.is_file():
        raise InputError(f"no backup at {backup}")
    try:
        conn = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
    except sqlite3.Error as err:
        raise InputError(f"cannot open {backup}: {err}") from None
    try:
        check_openable(conn, backup)
        if int(conn.execute("PRAGMA user_version").fetchone()[0]) == 0:
            raise InputError(f"{backup} is not a Vigil backup (an empty database)")
        verdict = [str(row[0]) for row in conn.execute("PRAGMA integrity_check(5)")]
        if verdict != ["ok"]:
            raise InputError(f"{backup} fails SQLite's integrity check ({'; '.join(verdict)}); nothing was changed")
        return int(conn.execute("SELECT count(*) FROM tasks").fetchone()[0])
    except (NotADatabase, SchemaTooNew) as err:
        raise InputError(f"{err}; nothing was changed") from None
    except sqlite3.DatabaseError as err:
        raise InputError(f"{backup} is not a usable Vigil database ({err}); nothing was changed") from None
    finally:
        conn.close()


def _swap(database: Path, copy: Path, now_ms: int) -> Path | None:
    """Rename ``copy`` over ``database`` while holding it exclusively; returns where
    the replaced file is kept."""
    if not database.exists():
        os.replace(copy, database)
        _sync_folder(database.parent)
        return None
    refuse_if_open(database)
    kept = _kept_name(database, now_ms)
    with _exclusive(database):
        # What SQLite could not fold into the old file stays with it, under its name.
        for suffix in SIDE_FILES:
            side = Path(f"{database}{suffix}")
            if side.exists():
                os.replace(side, Path(f"{kept}{suffix}"))
        os.link(database, kept)
        crash_point("during-restore")
        os.replace(copy, database)
        _sync_folder(database.parent)
    return kept


def _kept_name(database: Path, now_ms: int) -> Path:
    """``<name>.replaced-<UTC time>``, with ``-2``, ``-3`` … if that is taken."""
    stamp = datetime.fromtimestamp(now_ms / 1000, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
    kept = database.with_name(f"{database.name}.replaced-{stamp}")
    number = 1
    while kept.exists():
        number += 1
        kept = database.with_name(f"{database.name}.replaced-{stamp}-{number}")
    return kept


@contextlib.contextmanager
def _exclusive(database: Path) -> Iterator[None]:
    """Hold ``database`` so that no other process can open it meanwhile: out of WAL
    mode (possible only while no other connection has it open; the log is written
    back and removed) and under an exclusive lock. A file SQLite cannot read at all
    (the damage a restore repairs) is held by nothing but the ``/proc`` check."""
    conn = sqlite3.connect(database, isolation_level=None, timeout=0)
    try:
        try:
            conn.execute("PRAGMA journal_mode = DELETE").fetchone()
            conn.execute("BEGIN EXCLUSIVE")
        except sqlite3.DatabaseError as err:
            code = (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF
            if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise InputError(
                    f"{database} is open in another process; stop every Vigil process of this home "
                    "(vigil run, the TUI, vigil events --follow) and any sqlite3 shell first; nothing was changed"
                ) from None
            # else unreadable (what a restore repairs): swapped without SQLite's lock
        yield
    finally:
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        conn.close()


def refuse_if_open(database: Path) -> None:
    """Raise ``InputError`` naming the processes this one can see that have the
    database or its side files open (Linux ``/proc``; others' processes may be
    hidden from it, which SQLite's own check then catches)."""
    holders = openers([database, *(Path(f"{database}{suffix}") for suffix in SIDE_FILES)])
    if holders:
        who = "; ".join(f"pid {pid} ({command})" for pid, command in holders[:5])
        raise InputError(
            f"{database} is open in another process: {who}; stop it first (vigil run, the TUI, "
            "vigil events --follow); nothing was changed"
        )


def openers(paths: list[Path]) -> list[tuple[int, str]]:
    """The processes other than this one that have one of ``paths`` open, as (pid,
    command line cut to 80 characters); [] where ``/proc`` cannot tell."""
    wanted = {str(path.resolve()) for path in paths}
    found = []
    try:
        pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            targets = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in fds}
        except OSError:
            continue
        if targets & wanted:
            found.append((pid, _command_line(pid)))
    return found


def _command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    text = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return text if len(text) <= 80 else text[:79] + "…"


def _fresh_private(path: Path) -> None:
    """An empty file at ``path``, 0600 (a leftover of a killed restore is replaced)."""
    path.unlink(missing_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    """Make the renames in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
