"""A slow fake agent for the `command` executor: the task JSON arrives on stdin.

It appends markers to the file named by argv[1] so tests can see what ran where:

    start <task id> <attempt> <pid> <pid start time> <parent pid> <child pid>
    end <task id> <attempt> <pid>
    overlap <pid> <other pid>      another agent was still alive when this one started

The task's description is JSON: ``{"sleep": seconds, "sleep_attempts": n}`` sleeps
only on attempts up to n (default: every attempt). A child process that sleeps
stands for the tools an agent starts; it lives in the agent's process group.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat; None when the process is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw.rpartition(b")")[2].decode().split()
    return None if fields[0] == "Z" else fields[19]


def append(markers: Path, line: str) -> None:
    with markers.open("a", encoding="utf-8") as out:
        out.write(line + "\n")


def main() -> None:
    markers = Path(sys.argv[1])
    task = json.loads(sys.stdin.read())
    spec = json.loads(task["description"] or "{}")
    sleep_s = float(spec.get("sleep", 0)) if task["attempt"] <= int(spec.get("sleep_attempts", 1000)) else 0.0
    me = os.getpid()
    if markers.exists():
        for line in markers.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if parts[0] == "start" and int(parts[3]) != me and start_time(int(parts[3])) == parts[4]:
                append(markers, f"overlap {me} {parts[3]}")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    append(markers, f"start {task['id']} {task['attempt']} {me} {start_time(me)} {os.getppid()} {child.pid}")
    time.sleep(sleep_s)
    child.kill()
    child.wait()
    append(markers, f"end {task['id']} {task['attempt']} {me}")
    print(json.dumps({"status": "completed", "summary": f"slept {sleep_s:g}s"}), flush=True)


if __name__ == "__main__":
    main()
