"""Lanes: how many dispatchers may run tasks at once (``[dispatch] lanes``).

Each running dispatcher holds one lane; one that finds every lane taken stands by
and tries again. ``LaneLock`` is what the daemon needs of a lane, whatever keeps
it: ``FileLanes`` here (SQLite: one ``flock`` file per lane beside the database) or
PostgreSQL advisory locks (``PostgresLanes`` in ``vigil.store.postgres.lanes``).

A kernel lock coordinates the processes of one machine only, so lanes > 1 on a
SQLite file that lives on a network filesystem are refused
(``refuse_network_filesystem``): dispatchers on two machines would each take
"lane 0" and run twice as many tasks, or the same task twice. With lanes = 1 the
lock is the single-dispatcher lock it always was (lane 0 keeps its path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from dispatch.lock import DispatcherLock, LockHolder, lock_path_for
from dispatch.worker_ids import this_host
from vigil.clock import Clock, SystemClock
from vigil.config import Settings
from vigil.errors import ConfigError, OperationError
from vigil.status import LockProbe

MOUNTINFO = Path("/proc/self/mountinfo")

# Filesystems whose files other machines can open too (Linux mount type names).
NETWORK_FS_TYPES = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs",
        "lustre", "gfs2", "ocfs2", "beegfs", "gpfs", "davfs", "virtiofs",
    }
)  # fmt: skip
NETWORK_FUSE_TYPES = frozenset(
    {"sshfs", "rclone", "s3fs", "gcsfuse", "glusterfs", "ceph", "cephfs", "davfs", "juicefs", "goofys", "smbnetfs"}
)


class LaneLock(Protocol):
    """One of ``lanes`` lanes, held by at most one dispatcher at a time."""

    lanes: int

    @property
    def lane(self) -> int | None:
        """The lane held (0 … lanes-1), None while none is."""
        ...

    @property
    def where(self) -> str:
        """What keeps the lanes, for messages (a path, a masked URL)."""
        ...

    async def try_acquire(self) -> bool:
        """Take any free lane; True when one is held (also when already held).
        Never waits for a lane. Raises ``OperationError`` when the lock itself
        cannot be reached (an unwritable folder, a server that is down)."""
        ...

    async def still_held(self) -> bool:
        """Whether the lane is still ours. False once it is lost (the session that
        held it died): the dispatcher must then stop claiming. Never raises."""
        ...

    async def holders(self) -> str:
        """Who holds the lanes, as far as known, for the standby message. Never raises."""
        ...

    async def others_held(self) -> bool:
        """Whether a lane other than this one's is held by another dispatcher now.
        Never raises (False when it cannot be told)."""
        ...

    async def release(self) -> None:
        """Give the lane up (idempotent)."""
        ...


def lane_path(database: Path, lane: int) -> Path:
    """The lock file of ``lane``: lane 0 is the single-dispatcher lock's own path."""
    base = lock_path_for(database)
    return base if lane == 0 else base.with_name(f"{base.name}.{lane}")


class FileLanes:
    """SQLite's lanes: an ``flock`` on one file per lane beside the database, freed
    by the kernel when the holder exits. Machine-local (see the module docstring)."""

    def __init__(self, database: Path, lanes: int, clock: Clock) -> None:
        self.lanes = lanes
        self._clock = clock
        self._locks = [DispatcherLock(lane_path(database, lane), clock) for lane in range(lanes)]
        self._lane: int | None = None

    @property
    def lane(self) -> int | None:
        return self._lane

    @property
    def where(self) -> str:
        return str(self._locks[0].path)

    async def try_acquire(self) -> bool:
        if self._lane is not None:
            return True
        for lane, lock in enumerate(self._locks):
            if lock.try_acquire():
                self._lane = lane
                return True
        return False

    async def still_held(self) -> bool:
        # The kernel keeps an flock for as long as this process lives.
        return self._lane is not None

    async def holders(self) -> str:
        found = [lock.holder() for lock in self._locks]
        return _describe([holder for holder in found if holder is not None])

    async def others_held(self) -> bool:
        for lane, lock in enumerate(self._locks):
            if lane == self._lane:
                continue
            # A probe of our own: a lane we can lock is free (and stays free: let go at once).
            probe = DispatcherLock(lock.path, self._clock)
            try:
                if not probe.try_acquire():
                    return True
            except OperationError:
                continue
            probe.release()
        return False

    async def release(self) -> None:
        if self._lane is not None:
            lane, self._lane = self._lane, None
            self._locks[lane].release()


def _lane_paths(database: Path, lanes: int) -> list[Path]:
    """The lock files of ``lanes`` lanes, and of any lane beyond them that a lock file
    exists for (a dispatcher started before ``[dispatch] lanes`` was lowered)."""
    paths = [lane_path(database, lane) for lane in range(lanes)]
    extra = lanes
    while lane_path(database, extra).exists():
        paths.append(lane_path(database, extra))
        extra += 1
    return paths


def lanes_held(database: Path, lanes: int) -> bool | None:
    """Whether a process on this machine holds a lane of the SQLite ``database`` now:
    a dispatcher running (``vigil run``, ``vigil dispatch once``). Unlike its
    heartbeat, the lock is freed by the kernel the moment its holder dies, and held
    however long the holder cannot write the database. None: cannot be told (a lock
    file that cannot be opened)."""
    found = [DispatcherLock(path, SystemClock()).taken_by_another() for path in _lane_paths(database, lanes)]
    if any(found):
        return True
    return None if None in found else False


def lock_probe(settings: Settings) -> LockProbe | None:
    """What this machine's dispatcher lanes' locks say, for ``vigil status`` and the
    TUI's loop line; None on PostgreSQL, whose lanes other machines hold (the
    heartbeat tells there). A file open and a non-blocking ``flock`` per lane."""
    if settings.store.url is not None:
        return None
    return LockProbe(lanes_held(settings.store.path, settings.dispatch.lanes), this_host())


class AllLanes:
    """Every lane of a SQLite home at once, held by what must not run beside any
    dispatcher (``vigil restore``, ``vigil store migrate``): a dispatcher started
    meanwhile stands by (``vigil run``) or is refused (``vigil dispatch once``), and
    says who holds them (``purpose``)."""

    def __init__(self, database: Path, lanes: int, clock: Clock, purpose: str) -> None:
        self._locks = [DispatcherLock(path, clock, purpose) for path in _lane_paths(database, lanes)]

    def try_acquire(self) -> bool:
        """Take every lane, or none: False when a lane is held. Raises
        ``OperationError`` when a lock file cannot be opened."""
        for lock in self._locks:
            if not lock.try_acquire():
                self.release()
                return False
        return True

    def holders(self) -> str:
        """Who holds the lanes this could not take, for the refusal."""
        return _describe([h for lock in self._locks if not lock.held and (h := lock.holder()) is not None])

    def release(self) -> None:
        for lock in self._locks:
            lock.release()


def _describe(holders: list[LockHolder]) -> str:
    if not holders:
        return "another process"
    shown = "; ".join(holder.describe() for holder in holders[:3])
    return shown + (f" and {len(holders) - 3} more" if len(holders) > 3 else "")


def filesystem_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The mount type (``ext4``, ``nfs4``, ``fuse.sshfs`` …) of the filesystem that
    holds ``path`` (which need not exist yet: its nearest existing parent is used),
    from ``/proc/self/mountinfo`` or the ``mountinfo`` text given. None when unknown
    (no ``/proc``)."""
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    target = path.resolve()
    best, best_type = -1, None
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        mount_point = Path(_unescape(fields[4]))
        fs_type = line.split(" - ", 1)[1].split()[0]
        # the longest mount point that contains the path wins (later lines shadow earlier)
        if (target == mount_point or mount_point in target.parents) and len(mount_point.parts) >= best:
            best, best_type = len(mount_point.parts), fs_type
    return best_type


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def is_network_filesystem(fs_type: str) -> bool:
    """Whether files of this mount type can be opened from other machines."""
    base, _, subtype = fs_type.partition(".")
    if base in ("fuse", "fuseblk") and subtype:
        return subtype in NETWORK_FUSE_TYPES
    return base in NETWORK_FS_TYPES


def refuse_network_filesystem(database: Path, lanes: int, mountinfo: str | None = None) -> None:
    """Raise ``ConfigError`` when ``lanes`` > 1 and the database lives on a network
    filesystem: ``flock`` cannot keep dispatchers on several machines apart."""
    if lanes <= 1:
        return
    fs_type = filesystem_type(database, mountinfo)
    if fs_type is not None and is_network_filesystem(fs_type):
        raise ConfigError(
            f"[dispatch] lanes = {lanes} needs every dispatcher on one machine, but {database} is on a "
            f"network filesystem ({fs_type}); use lanes = 1 or a PostgreSQL store ([store] url)"
        )
