"""A year of daylight-saving changes in three zones through the real daemon, on the
simulated clock (tests/reliability/dst.py): every cron sensor runs once for each
wall time the docs promise, and ``vigil run`` answers SIGTERM in the gap and in the
repeated hour."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.dst import STOP_WITHIN_S, ZONES, run_year

pytestmark = [pytest.mark.slow, pytest.mark.alone]


@pytest.mark.timeout(300)
def test_every_cron_sensor_runs_once_per_wall_time_through_a_year_of_changes(tmp_path: Path) -> None:
    changes = run_year(tmp_path)
    assert sorted({change.zone for change in changes}) == sorted(ZONES)
    assert len(changes) == 2 * len(ZONES)
    assert [f"{change.zone}: {problem}" for change in changes for problem in change.problems] == []
    assert all(leg.stopped_in_s < STOP_WITHIN_S for change in changes for leg in change.legs)
