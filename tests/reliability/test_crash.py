"""The crash matrix in reduced form: SIGKILL `vigil run` (or the command that owns
the point) at each point, restart, and check nothing is lost (see crash.py).
The full run is ``python -m tests.reliability.crash --rounds 20``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.crash import POINTS, run_point

pytestmark = pytest.mark.slow

ROUNDS = 2


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_each_point_loses_nothing(home: Path, point: str) -> None:
    killed = run_point(home, point, rounds=ROUNDS, seed=7)
    assert killed == ROUNDS  # every round really died at the point


def test_without_the_variable_no_point_fires(home: Path) -> None:
    from vigil import faults

    for point in POINTS:
        faults.crash_point(point)  # would kill this test process if it fired
