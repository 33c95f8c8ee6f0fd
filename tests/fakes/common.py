"""What both fake agent CLIs share: options, recording what they received, scenarios
that are about processes rather than output formats.

Options come before the real CLI's own flags: ``FAKE [SCENARIO] [--record FILE]
[--sleep S] [--pid-file FILE] [--exit N] [--ignore-term] <real flags…>``. The
scenario may also come from ``FAKE_SCENARIO`` in the environment.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

CHILD_IGNORING_TERM = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n"


class Options(argparse.Namespace):
    """The fake's own options, as ``parse`` fills them in."""

    scenario: str
    record: str | None
    sleep: float
    pid_file: str | None
    exit: int
    ignore_term: bool


def parse(argv: list[str]) -> tuple[Options, list[str]]:
    # the scenario is the first argument unless that is already one of the real flags
    scenario = os.environ.get("FAKE_SCENARIO", "success")
    if argv and not argv[0].startswith("-") and argv[0] != "exec":
        scenario, argv = argv[0], argv[1:]
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--record")
    parser.add_argument("--sleep", type=float, default=30.0)
    parser.add_argument("--pid-file")
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--ignore-term", action="store_true")
    opts, rest = parser.parse_known_args(argv, namespace=Options())
    opts.scenario = scenario
    return opts, rest


def read_stdin() -> str:
    return sys.stdin.buffer.read().decode("utf-8", errors="replace")


def record(path: str | None, stdin: str) -> None:
    """Write what this process received, for the test to assert on."""
    if not path:
        return
    body = {"argv": sys.argv, "stdin": stdin, "env": dict(os.environ), "cwd": os.getcwd(), "pid": os.getpid()}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(body, f)


def emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def raw(text: str | bytes) -> None:
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


def write_pids(path: str | None, pids: list[int]) -> None:
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(pids, f)
        os.replace(tmp, path)


def sleep_with_child(opts: Options) -> None:
    """Start a child that ignores SIGTERM, write both pids, then sleep."""
    if opts.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", CHILD_IGNORING_TERM])
    write_pids(opts.pid_file, [os.getpid(), child.pid])
    time.sleep(opts.sleep)


def sleep(opts: Options) -> None:
    if opts.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    write_pids(opts.pid_file, [os.getpid()])
    time.sleep(opts.sleep)
