"""The accelerated clock (a testing aid for the simulated week): its arithmetic, how
the daemon takes it from the environment, and a bad value refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.agents.claude.executor import ClaudeExecutor
from dispatch.agents.codex.executor import CodexExecutor
from dispatch.executors import build_executor
from tests.conftest import VigilRunner
from vigil.clock import (
    ACCELERATED_CLOCK_ENV,
    AcceleratedClock,
    ManualClock,
    SystemClock,
    clock_from_env,
    clock_ms,
    real_seconds,
    wall_ms,
)
from vigil.config import load_settings
from vigil.errors import ConfigError

ANCHOR = 1_767_225_600_000


def test_simulated_time_runs_factor_times_faster_from_the_anchor() -> None:
    clock = AcceleratedClock(1440, ANCHOR)
    assert clock.clock_ms(ANCHOR) == ANCHOR
    assert clock.clock_ms(ANCHOR + 60_000) == ANCHOR + 86_400_000  # a real minute is a simulated day
    assert clock.wall_ms(ANCHOR + 86_400_000) == ANCHOR + 60_000
    # rounded up: a scheduler woken at that wall time finds the moment reached
    assert clock.clock_ms(clock.wall_ms(ANCHOR + 1)) >= ANCHOR + 1


def test_now_is_the_simulated_reading_of_the_wall_clock() -> None:
    clock = AcceleratedClock(1000, ANCHOR)
    before = SystemClock().now_ms()
    now = clock.now_ms()
    after = SystemClock().now_ms() + 1
    assert clock.clock_ms(before) <= now <= clock.clock_ms(after)


def test_conversions_are_one_to_one_for_every_other_clock() -> None:
    for clock in (SystemClock(), ManualClock()):
        assert real_seconds(clock, 1500) == 1.5
        assert wall_ms(clock, ANCHOR) == ANCHOR
        assert clock_ms(clock, ANCHOR) == ANCHOR
    accelerated = AcceleratedClock(600, ANCHOR)
    assert real_seconds(accelerated, 60_000) == pytest.approx(0.1)
    assert wall_ms(accelerated, ANCHOR + 60_000) == ANCHOR + 100
    assert clock_ms(accelerated, ANCHOR + 100) == ANCHOR + 60_000


def test_the_environment_selects_the_clock() -> None:
    assert isinstance(clock_from_env({}), SystemClock)
    assert isinstance(clock_from_env({ACCELERATED_CLOCK_ENV: "  "}), SystemClock)
    clock = clock_from_env({ACCELERATED_CLOCK_ENV: f"1440@{ANCHOR}"})
    assert isinstance(clock, AcceleratedClock)
    assert (clock.factor, clock.anchor_ms) == (1440, ANCHOR)
    started = SystemClock().now_ms()
    unanchored = clock_from_env({ACCELERATED_CLOCK_ENV: "2.5"})
    assert isinstance(unanchored, AcceleratedClock)
    assert unanchored.factor == 2.5
    assert started <= unanchored.anchor_ms <= SystemClock().now_ms()  # simulated time starts now


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("fast", "expected FACTOR or FACTOR@ANCHOR_MS"),
        ("0.5", "factor must be 1-100000"),
        ("1e9", "factor must be 1-100000"),
        ("nan", "factor must be 1-100000"),
        ("100@yesterday", "ANCHOR_MS in Unix epoch milliseconds"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_the_variable(value: str, says: str) -> None:
    with pytest.raises(ConfigError, match=ACCELERATED_CLOCK_ENV) as caught:
        clock_from_env({ACCELERATED_CLOCK_ENV: value})
    assert says in str(caught.value)


def test_vigil_run_refuses_a_bad_accelerated_clock_in_one_line(vigil: VigilRunner) -> None:
    proc = vigil("run", env={ACCELERATED_CLOCK_ENV: "warp"}, timeout=60)  # served: the timeout fails it
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert ACCELERATED_CLOCK_ENV in lines[0]
    assert "Traceback" not in proc.stderr


def test_agent_executors_read_usage_limit_resets_on_the_given_clock(home: Path) -> None:
    """A reset named as a time of day ("resets 4:50pm") is the next such moment
    after the *daemon's* now, simulated or not."""
    settings = load_settings(home)
    clock = ManualClock(ANCHOR)
    for name in ("claude", "codex"):
        executor = build_executor(name, settings, clock=clock)
        assert isinstance(executor, ClaudeExecutor | CodexExecutor)
        assert executor.now_ms() == clock.now_ms()
        clock.advance(1)
