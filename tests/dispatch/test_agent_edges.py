"""Small pure parts of running agents: environment, prices, reset times, caps."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dispatch.agents.pricing import TokenUsage, api_cost_usd, model_price, price_for
from dispatch.environment import agent_env
from dispatch.executors.answer import DETAIL_MAX_CHARS, detail_of, summary_of
from dispatch.executors.resets import bar_epoch_ms, clock_zone_ms, reset_ms, try_again_clock_ms, try_again_ms
from tests.dispatch.agent_support import agent_settings
from vigil.config import Price
from vigil.errors import ConfigError


def test_agent_env_is_explicit(home: Path) -> None:
    settings = agent_settings(home, dispatch={"pass_env": ["ANTHROPIC_API_KEY", "NOT_SET_ANYWHERE"]})
    source = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/u",
        "LANG": "en_GB.UTF-8",
        "TMPDIR": "/tmp/x",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "ANTHROPIC_API_KEY": "sk",
        "VIGIL_TASK_ID": "999",
    }
    env = agent_env(settings, 12, 34, source=source)
    scripts = str(Path(sys.executable).parent)
    assert env == {
        "PATH": f"{scripts}:/usr/bin:/bin" if (Path(scripts) / "vigil").exists() else "/usr/bin:/bin",
        "HOME": "/home/u",
        "LANG": "en_GB.UTF-8",
        "TMPDIR": "/tmp/x",
        "ANTHROPIC_API_KEY": "sk",
        "VIGIL_HOME": str(home),
        "VIGIL_TASK_ID": "12",
        "VIGIL_RUN_ID": "34",
    }


def test_agent_env_defaults_path_and_locale(home: Path) -> None:
    env = agent_env(agent_settings(home), 1, 2, source={})
    assert env["PATH"].endswith("/usr/local/bin:/usr/bin:/bin")
    assert env["LANG"] == "C.UTF-8"
    assert "HOME" not in env


def test_prices_exact_prefix_and_unknown() -> None:
    prices = {"claude-opus-4": Price(5, 25), "claude-opus-4-6": Price(6, 30), "claude": Price(1, 1)}
    assert price_for(prices, "claude-opus-4-6") == Price(6, 30)
    assert price_for(prices, "claude-opus-4-1") == Price(5, 25)
    assert price_for(prices, "gpt-5") is None
    assert price_for(prices, None) is None
    usage = TokenUsage(input=1_000_000, output=2_000_000, cache_read=10, cache_write=20)
    assert api_cost_usd({"m": Price(1, 2, 0.5, 4)}, "m", usage) == pytest.approx(1 + 4 + 5e-6 + 8e-5)
    assert api_cost_usd({}, "m", usage) == 0.0


def test_reset_time_forms() -> None:
    assert bar_epoch_ms("Claude AI usage limit reached|1767225600") == 1_767_225_600_000
    assert bar_epoch_ms("nothing here") is None
    now = int(datetime(2026, 1, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)  # 05:00 in Denver
    # a time named to the minute is read as the end of that minute
    four_fifty_denver = int(datetime(2026, 1, 1, 23, 51, tzinfo=UTC).timestamp() * 1000)
    assert clock_zone_ms("resets 4:50pm (America/Denver)", now) == four_fifty_denver
    assert clock_zone_ms("resets 4pm (UTC)", now) == int(datetime(2026, 1, 1, 16, 1, tzinfo=UTC).timestamp() * 1000)
    # a time more than an hour past today means tomorrow
    assert clock_zone_ms("resets 9am (UTC)", now) == int(datetime(2026, 1, 2, 9, 1, tzinfo=UTC).timestamp() * 1000)
    assert clock_zone_ms("resets 4:50pm (Not/AZone)", now) is None
    assert clock_zone_ms("resets 13pm (UTC)", now) is None
    assert try_again_ms("Please try again at Apr 11th, 2026 2:32 PM.") == int(
        datetime(2026, 4, 11, 14, 33).timestamp() * 1000
    )
    assert try_again_ms("try again at Foo 31st, 2026 2:32 PM") is None
    assert try_again_ms("try again at Feb 30th, 2026 2:32 PM") is None
    assert reset_ms("no time at all", now) is None


def test_a_reset_named_in_the_current_minute_is_its_end_never_tomorrow() -> None:
    # Codex prints a reset at 21:45:45 as "try again at 9:45 PM"; a retry at 21:45:00
    # meets the same text again
    end_of_minute = int(datetime(2026, 12, 1, 21, 46).timestamp() * 1000)
    for now in (datetime(2026, 12, 1, 21, 45, 0), datetime(2026, 12, 1, 21, 45, 50)):
        assert try_again_clock_ms("try again at 9:45 PM.", int(now.timestamp() * 1000)) == end_of_minute
    utc_now = int(datetime(2026, 12, 1, 2, 29, 54, tzinfo=UTC).timestamp() * 1000)
    assert clock_zone_ms("resets 2:29am (UTC)", utc_now) == utc_now + 6_000


def test_a_reset_a_little_in_the_past_is_past_and_one_long_gone_is_tomorrow() -> None:
    at = int(datetime(2026, 12, 1, 21, 50).timestamp() * 1000)
    stale = try_again_clock_ms("try again at 9:45 PM", at)
    assert stale == int(datetime(2026, 12, 1, 21, 46).timestamp() * 1000)  # 4 minutes ago: past, not tomorrow
    assert try_again_clock_ms("try again at 7:45 PM", at) == int(datetime(2026, 12, 2, 19, 46).timestamp() * 1000)
    # just after midnight, a time late yesterday is yesterday's
    after_midnight = int(datetime(2026, 12, 2, 0, 10).timestamp() * 1000)
    assert try_again_clock_ms("try again at 11:55 PM", after_midnight) == int(
        datetime(2026, 12, 1, 23, 56).timestamp() * 1000
    )
    # and late in the evening, a time early in the morning is tomorrow's
    assert try_again_clock_ms("try again at 1:30 AM", at) == int(datetime(2026, 12, 2, 1, 31).timestamp() * 1000)


def test_summary_and_detail_caps() -> None:
    assert summary_of("  Done.\n\n  All   good.  ") == "Done. All good."
    long = summary_of("word " * 1000)
    assert len(long) == 200
    assert long.endswith("…")
    assert detail_of("short") == "short"
    big = "x" * (DETAIL_MAX_CHARS + 10)
    capped = detail_of(big)
    assert capped.startswith("x" * DETAIL_MAX_CHARS)
    assert "10 more characters cut" in capped


def test_the_shipped_prices_price_a_family_and_never_a_newer_version_as_an_older_one() -> None:
    assert model_price({}, "gpt-5-codex") == Price(1.25, 10.0, 0.125)  # by its family
    assert model_price({}, "claude-sonnet-4-5-20250929") == Price(3.0, 15.0, 0.30, 3.75)
    assert model_price({}, "claude-opus-4-6[1m]") == Price(5.0, 25.0, 0.50, 6.25)  # context suffix ignored
    assert model_price({}, "claude-opus-4-1-20250805") == Price(15.0, 75.0, 1.50, 18.75)  # older, dearer
    assert model_price({}, "gpt-5.6-terra") is None  # not gpt-5's price
    assert model_price({}, "llama-3") is None
    # [prices] is asked first, and may add a model or override one
    assert model_price({"gpt-5.6": Price(9, 90)}, "gpt-5.6-terra") == Price(9, 90)
    assert model_price({"gpt-5-codex": Price(2, 20)}, "gpt-5-codex") == Price(2, 20)


def test_the_wall_settings_default_to_a_working_agent(home: Path) -> None:
    settings = agent_settings(home)
    assert settings.claude.permission_mode == "acceptEdits"  # edits in the workspace
    assert settings.claude.bash_sandbox is True
    assert settings.claude.allowed_tools == ()
    assert settings.claude.disallowed_tools == ("Bash(vigil:*)", "Bash(sqlite3:*)")
    assert (settings.dispatch.on_denial, settings.dispatch.keep_workspace_ms) == ("review", 7 * 86_400_000)
    chosen = agent_settings(
        home,
        dispatch={"on_denial": "complete", "keep_workspace": "1d"},
        executors={"claude": {"bash_sandbox": False, "disallowed_tools": []}},
    )
    assert (chosen.dispatch.on_denial, chosen.dispatch.keep_workspace_ms) == ("complete", 86_400_000)
    assert (chosen.claude.bash_sandbox, chosen.claude.disallowed_tools) == (False, ())
    with pytest.raises(ConfigError, match=r"\[dispatch\] on_denial: expected one of 'review', 'complete'"):
        agent_settings(home, dispatch={"on_denial": "ignore"})
    with pytest.raises(ConfigError, match=r"\[executors.claude\] bash_sandbox: expected true or false"):
        agent_settings(home, executors={"claude": {"bash_sandbox": "yes"}})
