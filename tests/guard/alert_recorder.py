"""An alert hook for tests: appends the JSON event from stdin (plus the env var the
hook gets) as one line to the file named by argv[1]; argv[2] "fail" exits 1 after
recording, "hang" sleeps first."""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    mode = sys.argv[2] if len(sys.argv) > 2 else "ok"
    if mode == "hang":
        time.sleep(600)
    event = json.load(sys.stdin)
    event["_env_event"] = os.environ.get("VIGIL_ALERT_EVENT")
    with open(sys.argv[1], "a", encoding="utf-8") as out:
        out.write(json.dumps(event) + "\n")
    if mode == "fail":
        print("smtp: connection refused", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
