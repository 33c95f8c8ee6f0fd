"""A system clock past 2262-04-11 (the limit of 64-bit nanoseconds, which CPython's
clocks use): ``time.time()`` itself raises, so every command failed with a traceback
from the standard library's logging (issue 38's fault hunt). Now each says so in one
line. The clock is moved for the one process by libfaketime (Debian: faketime)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FAKETIME = shutil.which("faketime")


@pytest.mark.skipif(FAKETIME is None, reason="moving the clock past 2262 needs faketime: apt-get install faketime")
@pytest.mark.parametrize("args", [("task", "list"), ("task", "add", "later"), ("status",), ("run",)])
def test_a_clock_past_2262_is_one_line_and_exit_1(home: Path, args: tuple[str, ...]) -> None:
    assert FAKETIME is not None
    done = subprocess.run(
        [FAKETIME, "2263-01-01 00:00:00", sys.executable, "-m", "vigil", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        "vigil: error: the system clock reads a time past 2262-04-11, which Python cannot represent; set it right\n"
    )
