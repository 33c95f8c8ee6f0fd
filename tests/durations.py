"""Every test's duration in a file, so that a test grown slow shows: `make test`
keeps its last run's in ``.test-durations``.

A pytest plugin (loaded by ``addopts`` in pyproject.toml). With
``--durations-file=FILE`` a run writes one line per test, ``seconds<TAB>node id``
(setup, call and teardown together), the slowest first, from pytest-xdist's
controller, which sees every worker's reports. Lines already in FILE are kept and
sorted in with the new ones, so `make test`'s two pytest runs (it empties the file
first) leave one list.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

OPTION = "--durations-file"
_seconds: defaultdict[str, float] = defaultdict(float)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        metavar="FILE",
        help="write each test's duration to FILE, slowest first (seconds, tab, id)",
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[report.nodeid] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    path = config.getoption(OPTION)
    if path is None or hasattr(config, "workerinput"):
        return  # not asked, or an xdist worker: the controller writes for all of them
    target = Path(path)
    lines = target.read_text(encoding="utf-8").splitlines() if target.exists() else []
    lines += [f"{seconds:.3f}\t{test}" for test, seconds in _seconds.items()]
    lines.sort(key=lambda line: -float(line.split("\t", 1)[0]))
    target.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
