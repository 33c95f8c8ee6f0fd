"""A lock file for one dispatcher: an ``flock`` on ``<database>.lock`` (and, with
``[dispatch] lanes`` > 1, one file per lane beside it: ``dispatch.lanes.FileLanes``).

The kernel releases the lock when its holder exits, however it exits, so a crashed
dispatcher never leaves a stale lock behind (no PID files). After taking the lock the
holder writes who it is (pid, host, since) into the file so that others can say who
holds it; the content is information only, the ``flock`` is the truth.

The file descriptor is not inherited by child processes (Python opens files
non-inheritable), so an agent that outlives its dispatcher cannot keep the lock.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

from dispatch.worker_ids import this_host
from vigil.clock import Clock, iso_utc
from vigil.errors import OperationError


@dataclass(frozen=True, slots=True)
class LockHolder:
    """Who wrote the lock file. ``since`` is epoch ms; ``purpose`` names a holder
    that is not a dispatcher (``vigil restore``, ``vigil store migrate``)."""

    pid: int
    host: str
    since: int
    purpose: str | None = None

    def describe(self) -> str:
        what = f" ({self.purpose})" if self.purpose else ""
        return f"pid {self.pid} on {self.host}{what} since {iso_utc(self.since)}"


def lock_path_for(database: Path) -> Path:
    return database.with_name(database.name + ".lock")


class DispatcherLock:
    """The lock beside one database. Not reentrant; one instance per process."""

    def __init__(self, path: Path, clock: Clock, purpose: str | None = None) -> None:
        self.path = path
        self._clock = clock
        self._purpose = purpose  # written for others to read: None, a dispatcher
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; never blocks. True when now held.

        Raises ``OperationError`` when the lock file cannot be opened.
        """
        if self._fd is not None:
            return True
        try:
            # No O_TRUNC: opening must not erase the current holder's details.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as err:
            raise OperationError(f"cannot open lock file {self.path}: {err.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        holder = {"pid": os.getpid(), "host": this_host(), "since": self._clock.now_ms()}
        if self._purpose is not None:
            holder["purpose"] = self._purpose
        data = json.dumps(holder).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data + b"\n", 0)
        return True

    def holder(self) -> LockHolder | None:
        """What the lock file says about its holder; None when empty or unreadable
        (the holder may be between taking the lock and writing its details)."""
        try:
            value = json.loads(self.path.read_text(encoding="utf-8"))
            purpose = value.get("purpose")
            return LockHolder(
                pid=int(value["pid"]),
                host=str(value["host"]),
                since=int(value["since"]),
                purpose=purpose if isinstance(purpose, str) else None,
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def taken_by_another(self) -> bool | None:
        """Whether another process holds the lock now, probed without taking it
        (a shared lock, let go at once); None when the file cannot be opened. A
        missing file is a lock nobody holds. Never raises."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return None
        finally:
            os.close(fd)  # also lets the probe's own lock go
        return False

    def release(self) -> None:
        """Give the lock up (idempotent). The file stays: removing it would let a
        waiter lock an unlinked inode while a newcomer locks a fresh file."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the descriptor releases the flock
