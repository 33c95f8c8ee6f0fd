"""The built-in sensors, listed explicitly (importing a module registers nothing).

``use = "<name>"`` in a ``[[sensors]]`` entry picks one; docs/sensors.md describes
each one's options.
"""

from __future__ import annotations

from collections.abc import Mapping

from sensors.api import SensorFunc
from sensors.builtin.command import command
from sensors.builtin.feed import feed
from sensors.builtin.git import git
from sensors.builtin.github import github
from sensors.builtin.http import http
from sensors.builtin.inbox import inbox
from sensors.builtin.queue_health import queue_health
from sensors.builtin.recurring import schedule

BUILTIN_SENSORS: tuple[SensorFunc, ...] = (
    schedule,
    inbox,
    http,
    feed,
    git,
    github,
    command,
    queue_health,
)
BUILTINS: Mapping[str, SensorFunc] = {func.__name__: func for func in BUILTIN_SENSORS}
