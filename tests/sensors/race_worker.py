"""One of two processes racing the same sensor keys on one database.

``python -m tests.sensors.race_worker HOME ROUNDS``: opens the store, says so with
the file HOME/ready-PID, waits for HOME/go, runs every sensor ROUNDS times through
``SensorRunner.run_now``, prints one JSON summary line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from sensors.config import load_sensor_specs
from sensors.runner import SensorRunner
from vigil.clock import SystemClock
from vigil.config import load_settings
from vigil.store import open_store


async def main(home: Path, rounds: int) -> None:
    settings = load_settings(home)
    store = await open_store(settings)
    runner = SensorRunner(store, settings, SystemClock(), load_sensor_specs(settings))
    (home / f"ready-{os.getpid()}").touch()
    while not (home / "go").exists():
        time.sleep(0.001)  # a busy start line, so both processes begin together
    created = ignored = rejected = 0
    statuses: list[str] = []
    for _ in range(rounds):
        for report in await runner.run_now():
            created += report.created
            ignored += report.ignored
            rejected += report.rejected
            statuses.append(report.status if report.ok else f"{report.status}: {report.error}")
    await store.close()
    print(json.dumps({"created": created, "ignored": ignored, "rejected": rejected, "statuses": sorted(set(statuses))}))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
