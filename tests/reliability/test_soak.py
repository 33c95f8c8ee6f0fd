"""A short soak: 100 sensors and a fake agent with mixed outcomes under `vigil run`
for 15 s; no file descriptor or process leaks, nothing stuck, integrity ok. The
longer run in docs/reliability.md is ``python -m tests.reliability.soak``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.soak import soak

pytestmark = [pytest.mark.slow, pytest.mark.alone]

FD_SLACK = 2  # descriptors the baseline may gain (a log rotation, a lazily opened file)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_short_soak_leaks_nothing_and_leaves_nothing_stuck(home: Path) -> None:
    # 15 s, and longer on a loaded machine until 50 tasks finished: the work done, not
    # the time spent, makes the samples worth judging
    report = soak(home, seconds=15, sensors=100, every="5s", sample_s=1, min_finished=51, max_seconds=200)
    assert report.exit_code == 0
    assert len(report.samples) >= 5
    finished = report.samples[-1].finished_tasks
    assert finished > 50  # the loop really ran the sensors' work (within 200 s however loaded)
    # A leak raises the baseline; a sample taken while a run's subprocess is being
    # started sees its pipes for a moment (both ends), which is not a leak. So compare
    # the lowest count of the last third of the samples with that of the first third.
    fds = [s.fds for s in report.samples]
    third = max(1, len(fds) // 3)
    assert min(fds[-third:]) <= min(fds[:third]) + FD_SLACK
    assert max(s.oldest_active_s for s in report.samples) < 60  # no task stuck active
    assert report.left_active == 0
    assert report.leftover_processes == []
    assert report.integrity == "ok"
    assert set(report.by_status) <= {"completed", "failed", "pending"}
