#!/usr/bin/env python3
"""Report the free space of the home's file system (the ``disk-check`` skill).

Input: the task as JSON on stdin (``home`` and ``description`` are used).
Output: one JSON line with status, summary and detail; exit 0 either way, since
"low on space" is a finding, not a crash. A bad threshold exits 2.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys

DEFAULT_MIN_FREE_PERCENT = 10.0
GIB = 1024**3


def main() -> int:
    task = json.load(sys.stdin)
    home = task.get("home") or os.environ.get("VIGIL_HOME") or "."
    match = re.search(r"min_free_percent\s*=\s*(\S+)", task.get("description") or "")
    try:
        minimum = float(match.group(1)) if match else DEFAULT_MIN_FREE_PERCENT
    except ValueError:
        print(f"disk-check: min_free_percent must be a number, got {match.group(1)!r}", file=sys.stderr)
        return 2
    usage = shutil.disk_usage(home)
    free_percent = 100.0 * usage.free / usage.total if usage.total else 0.0
    ok = free_percent >= minimum
    summary = f"{free_percent:.1f}% free ({usage.free / GIB:.1f} GiB of {usage.total / GIB:.1f} GiB)"
    summary += "" if ok else f", below the {minimum:g}% minimum"
    detail = f"file system of {home}: total {usage.total} B, used {usage.used} B, free {usage.free} B"
    print(json.dumps({"status": "completed" if ok else "failed", "summary": summary, "detail": detail}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
