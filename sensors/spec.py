"""``SensorSpec``: one configured sensor, as ``sensors.config`` validated it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sensors.api import SensorFunc
from sensors.timing import Schedule

CatchUp = Literal["once", "skip"]
CATCH_UPS: tuple[CatchUp, ...] = ("once", "skip")


@dataclass(frozen=True)
class SensorSpec:
    """One configured sensor. ``priority``/``skills`` None: no default set (tasks get
    5 and no skills unless the sensor says otherwise). Times in ms.

    ``catch_up``: what happens to runs that were due while no Vigil process ran the
    sensor (or ran it too late, past ``[sensor_defaults] misfire_grace``): ``once``
    runs the latest of them as soon as it can, ``skip`` waits for the next one.
    Either way each run not made is recorded as skipped."""

    name: str
    use: str
    func: SensorFunc
    schedule: Schedule
    timeout_ms: int
    max_tasks: int
    enabled: bool
    options: Mapping[str, Any]
    priority: int | None = None
    skills: tuple[str, ...] | None = None
    description: str = ""
    # The key space its tasks' keys live in; None: the sensor's own name. Sensors
    # with one prefix dedupe against each other; "" is the space of bare keys.
    key_prefix: str | None = None
    catch_up: CatchUp = "once"

    def source_key(self, key: str) -> str:
        """The stored source key of a task this sensor returned with ``key``:
        ``"<key_prefix>:<key>"``, or the bare key when the prefix is empty."""
        prefix = self.name if self.key_prefix is None else self.key_prefix
        return f"{prefix}:{key}" if prefix else key
