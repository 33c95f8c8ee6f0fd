"""Sensors: small async detectors that turn what they notice into tasks.

Write one as ``async def name(ctx: SensorContext) -> list[FoundTask]`` and name it in
vigil.toml; see docs/sensors.md. This package exposes the author's API only; the
scheduler lives in ``sensors.runner`` (imported by the daemon, not here).
"""

from sensors.api import FoundTask, QueueView, SensorContext, sensor

__all__ = ["FoundTask", "QueueView", "SensorContext", "sensor"]
