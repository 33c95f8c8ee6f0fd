"""The [budget], [limits] and [alerts] sections: defaults, values, and errors that
name the file and the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vigil.config import settings_from_mapping
from vigil.errors import ConfigError

SOURCE = Path("vigil.toml")


def _settings(data: dict[str, Any]) -> Any:
    return settings_from_mapping(data, Path("/home/agent"), SOURCE)


def test_defaults() -> None:
    s = _settings({})
    assert (s.budget.daily_usd, s.budget.urgent_priority, s.budget.warn_at, s.budget.per_sensor) == (
        None,
        1,
        (0.5, 0.8, 1.0),
        {},
    )
    assert (s.limits.max_depth, s.limits.max_children, s.limits.max_per_source_per_day) == (5, 20, 500)
    assert (s.limits.per_source, s.limits.max_consecutive_failures) == ({}, 5)
    assert (s.alerts.command, s.alerts.timeout_ms) == ((), 30_000)
    assert (s.alerts.stale_dispatcher_ms, s.alerts.stale_sensor_ms) == (300_000, 3_600_000)
    assert s.alerts.held_loop_ms == 1_800_000  # a self-ending hold is told after 30 minutes
    assert s.dispatch.outage_backoff_ms == (30_000, 60_000, 120_000, 300_000, 600_000)


def test_values() -> None:
    s = _settings(
        {
            "budget": {"daily_usd": 20, "urgent_priority": 2, "warn_at": [1.0, 0.5, 0.5], "per_sensor": {"feeds": 2}},
            "limits": {"max_depth": 0, "max_children": 3, "per_source": {"sensor:feeds": 50}},
            "alerts": {"command": ["notify", "--json"], "timeout": "5s", "stale_sensor": "2h"},
        }
    )
    assert (s.budget.daily_usd, s.budget.urgent_priority, s.budget.warn_at) == (20.0, 2, (0.5, 1.0))
    assert s.budget.per_sensor == {"feeds": 2.0}
    assert (s.limits.max_depth, s.limits.max_children, s.limits.per_source) == (0, 3, {"sensor:feeds": 50})
    assert (s.alerts.command, s.alerts.timeout_ms, s.alerts.stale_sensor_ms) == (("notify", "--json"), 5000, 7_200_000)


def test_the_outage_backoff_and_the_held_loop_threshold() -> None:
    s = _settings({"dispatch": {"outage_backoff": ["5s", "5s", "1m"]}, "alerts": {"held_loop": "2h"}})
    assert (s.dispatch.outage_backoff_ms, s.alerts.held_loop_ms) == ((5000, 5000, 60_000), 7_200_000)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"budget": {"daily_usd": -1}}, "[budget] daily_usd: expected a non-negative number"),
        ({"budget": {"urgent_priority": 10}}, "[budget] urgent_priority: expected a priority from 1 to 9"),
        ({"budget": {"warn_at": [0.5, 1.5]}}, "[budget] warn_at: expected a list of fractions"),
        ({"budget": {"warn_at": 0.5}}, "[budget] warn_at: expected a list of fractions"),
        ({"budget": {"per_sensor": {"feeds": "lots"}}}, "[budget] per_sensor: expected a table of name = USD"),
        ({"budget": {"dailyusd": 5}}, "[budget] unknown key 'dailyusd'"),
        ({"limits": {"max_children": -1}}, "[limits] max_children: expected an integer ≥ 0"),
        ({"limits": {"per_source": {"sensor:x": 1.5}}}, "[limits] per_source: expected a table of name = count"),
        ({"alerts": {"command": "mail -s vigil me"}}, "[alerts] command: expected a list of strings"),
        ({"alerts": {"timeout": 30}}, "[alerts] timeout: expected a duration"),
        ({"budget": 5}, "budget: expected a table [budget]"),
        ({"alerts": {"held_loop": 30}}, "[alerts] held_loop: expected a duration"),
        ({"dispatch": {"outage_backoff": []}}, "[dispatch] outage_backoff: expected a non-empty list of growing"),
        ({"dispatch": {"outage_backoff": ["1m", "30s"]}}, "[dispatch] outage_backoff: expected a non-empty list"),
        ({"dispatch": {"outage_backoff": ["soon"]}}, "[dispatch] outage_backoff: expected a non-empty list"),
        ({"dispatch": {"outage_backoff": "30s"}}, "[dispatch] outage_backoff: expected a non-empty list"),
    ],
)
def test_errors_name_the_file_and_the_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _settings(data)
    assert str(caught.value).startswith("vigil.toml")
    assert message in str(caught.value)
