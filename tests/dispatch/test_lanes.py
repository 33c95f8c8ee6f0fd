"""Lanes on SQLite: one flock file per lane beside the database, and the refusal of
lanes > 1 on a network filesystem (where flock cannot keep machines apart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.lanes import (
    FileLanes,
    filesystem_type,
    is_network_filesystem,
    lane_path,
    refuse_network_filesystem,
)
from dispatch.lock import lock_path_for
from vigil.clock import ManualClock
from vigil.config import MAX_LANES, settings_from_mapping
from vigil.errors import ConfigError

# /proc/self/mountinfo of a machine whose /srv/shared is NFS, /mnt/remote is sshfs,
# and /home/me/My Files (a path with a space) is a local fuse-overlayfs mount.
MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /srv/shared rw,relatime shared:12 - nfs4 server:/export rw,vers=4.2
31 22 0:27 / /mnt/remote rw,nosuid shared:13 - fuse.sshfs me@far:/data rw,user_id=1000
32 22 0:28 / /home/me/My\\040Files rw shared:14 - fuse.fuse-overlayfs fuse-overlayfs rw
33 30 0:29 / /srv/shared/local rw shared:15 - tmpfs tmpfs rw
"""


async def test_each_dispatcher_takes_a_free_lane_until_none_is_left(tmp_path: Path, clock: ManualClock) -> None:
    database = tmp_path / "vigil.db"
    first, second, third = (FileLanes(database, 2, clock) for _ in range(3))

    assert await first.try_acquire()
    assert await second.try_acquire()
    assert not await third.try_acquire()
    assert {first.lane, second.lane} == {0, 1}
    assert third.lane is None
    assert await first.try_acquire()  # already held: still the same lane
    assert first.lane == 0
    assert await first.still_held()
    assert not await third.still_held()
    assert (await third.holders()).count("pid ") == 2

    await first.release()
    await first.release()  # idempotent
    assert await third.try_acquire()
    assert third.lane == 0


async def test_lane_zero_is_the_single_dispatcher_lock(tmp_path: Path, clock: ManualClock) -> None:
    database = tmp_path / "data" / "vigil.db"
    assert lane_path(database, 0) == lock_path_for(database)
    assert lane_path(database, 3) == tmp_path / "data" / "vigil.db.lock.3"

    one = FileLanes(database.with_name("x.db"), 1, clock)
    database.parent.mkdir()
    assert await one.try_acquire()
    assert not await FileLanes(database.with_name("x.db"), 1, clock).try_acquire()
    await one.release()


def test_the_filesystem_of_a_path_is_its_deepest_mount() -> None:
    assert filesystem_type(Path("/srv/shared/homes/vigil.db"), MOUNTINFO) == "nfs4"
    assert filesystem_type(Path("/srv/shared/local/vigil.db"), MOUNTINFO) == "tmpfs"
    assert filesystem_type(Path("/srv/sharedness/vigil.db"), MOUNTINFO) == "ext4"
    assert filesystem_type(Path("/mnt/remote/vigil.db"), MOUNTINFO) == "fuse.sshfs"
    assert filesystem_type(Path("/home/me/My Files/vigil.db"), MOUNTINFO) == "fuse.fuse-overlayfs"
    assert filesystem_type(Path("/var/lib/vigil.db"), MOUNTINFO) == "ext4"
    assert filesystem_type(Path("/x"), "") is None


def test_this_machines_tmp_path_is_known_and_local(tmp_path: Path) -> None:
    fs_type = filesystem_type(tmp_path / "vigil.db")
    assert fs_type is not None
    assert not is_network_filesystem(fs_type)


@pytest.mark.parametrize(
    ("fs_type", "network"),
    [
        ("nfs", True),
        ("nfs4", True),
        ("cifs", True),
        ("smb3", True),
        ("9p", True),
        ("fuse.sshfs", True),
        ("fuse.rclone", True),
        ("ext4", False),
        ("xfs", False),
        ("btrfs", False),
        ("tmpfs", False),
        ("overlay", False),
        ("fuse.fuse-overlayfs", False),
    ],
)
def test_network_filesystems_are_recognised(fs_type: str, network: bool) -> None:
    assert is_network_filesystem(fs_type) is network


def test_lanes_above_one_on_a_network_filesystem_are_refused() -> None:
    on_nfs = Path("/srv/shared/home/data/vigil.db")
    with pytest.raises(ConfigError) as refused:
        refuse_network_filesystem(on_nfs, 2, MOUNTINFO)
    message = str(refused.value)
    assert "\n" not in message
    assert "lanes = 2" in message
    assert "network filesystem (nfs4)" in message
    assert str(on_nfs) in message

    with pytest.raises(ConfigError, match=r"fuse\.sshfs"):
        refuse_network_filesystem(Path("/mnt/remote/vigil.db"), 4, MOUNTINFO)
    refuse_network_filesystem(on_nfs, 1, MOUNTINFO)  # one lane: today's single lock, allowed
    refuse_network_filesystem(Path("/var/lib/vigil.db"), 8, MOUNTINFO)


def test_lanes_config_defaults_to_one_and_checks_its_range(tmp_path: Path) -> None:
    source = tmp_path / "vigil.toml"
    assert settings_from_mapping({}, tmp_path, source, env={}).dispatch.lanes == 1
    assert settings_from_mapping({"dispatch": {"lanes": 4}}, tmp_path, source, env={}).dispatch.lanes == 4
    for bad in (0, -1, MAX_LANES + 1, "4", True, 1.5):
        with pytest.raises(ConfigError, match=r"\[dispatch\] lanes: expected an integer"):
            settings_from_mapping({"dispatch": {"lanes": bad}}, tmp_path, source, env={})


async def test_others_held_sees_other_dispatchers_lanes_and_leaves_free_ones_free(
    tmp_path: Path, clock: ManualClock
) -> None:
    database = tmp_path / "vigil.db"
    ours, theirs, later = (FileLanes(database, 3, clock) for _ in range(3))
    assert await ours.try_acquire()
    assert not await ours.others_held()  # lanes 1 and 2 are free

    assert await theirs.try_acquire()
    assert await ours.others_held()
    assert await theirs.others_held()

    await theirs.release()
    assert not await ours.others_held()
    await ours.release()
    assert not await ours.others_held()  # holding none, seeing none
    assert await later.try_acquire()  # the probes left every lane free
    assert later.lane == 0
    await later.release()
