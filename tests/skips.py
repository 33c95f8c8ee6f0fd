"""The tests a run skipped, grouped by reason: the block that ends `make test`.

A pytest plugin (loaded by ``addopts`` in pyproject.toml) and a script. With
``--skip-report=FILE``, a pytest run appends each test it skipped to FILE, one JSON
line each (``{"test": node id, "reason": …}``), from pytest-xdist's controller, which
sees every worker's results; `make test`'s two pytest runs append to the same file.
Then ``python -m tests.skips FILE`` prints how many tests each reason skipped.

The grouping is by the reason's text, so a new skip shows up without a change here;
each reason is written to say what is missing and what would run the tests
("tmux is not installed: install tmux to run them").
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

OPTION = "--skip-report"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        metavar="FILE",
        help="append each skipped test and its reason to FILE (JSON lines; python -m tests.skips FILE sums them up)",
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    path = config.getoption(OPTION)
    if path is None or hasattr(config, "workerinput"):
        return  # not asked, or an xdist worker: the controller writes for all of them
    with Path(path).open("a", encoding="utf-8") as out:
        for report in terminalreporter.stats.get("skipped", []):
            out.write(json.dumps({"test": report.nodeid, "reason": reason(report)}) + "\n")


def reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason a skipped test's (or module's) report gives, as pytest's own
    summary shows it: without the ``Skipped:`` prefix."""
    longrepr = report.longrepr
    text = str(longrepr[2]) if isinstance(longrepr, tuple | list) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def summary(reasons: list[str]) -> str:
    """The block: a heading with the number of skipped tests, then one line per
    reason with how many tests it skipped, the largest group first."""
    if not reasons:
        return "Skipped tests: none."
    groups = sorted(Counter(reasons).items(), key=lambda group: (-group[1], group[0]))
    width = len(str(groups[0][1]))
    total = len(reasons)
    lines = [f"Skipped tests: {total}, by reason (each says what would run them):"]
    lines += [f"  {count:>{width}}  {text}" for text, count in groups]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.skips FILE  (a file written by pytest --skip-report=FILE)", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        print(f"tests.skips: cannot read {path}: {err.strerror}", file=sys.stderr)
        return 1
    reasons = [json.loads(line)["reason"] for line in text.splitlines() if line.strip()]
    print(summary(reasons))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
