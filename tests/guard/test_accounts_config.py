"""The keys of limits and outages: accounts per agent CLI, fallback, stalls, the
gate's floor; and the skill keys that bound a task's spend and forbid fallback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dispatch.skills import load_skill
from vigil.config import Account, settings_from_mapping
from vigil.errors import ConfigError, SkillError

SOURCE = Path("vigil.toml")
HOME = Path("/home/agent")


def _settings(data: dict[str, Any]) -> Any:
    return settings_from_mapping(data, HOME, SOURCE)


def test_defaults() -> None:
    s = _settings({})
    assert (s.dispatch.stall_timeout_ms, s.dispatch.fallback, s.dispatch.min_gate_ms) == (600_000, (), 30_000)
    assert (s.claude.accounts, s.codex.accounts) == ((), ())


def test_accounts_fallback_and_stalls() -> None:
    s = _settings(
        {
            "dispatch": {"stall_timeout": "5m", "fallback": ["codex", "codex"], "min_gate": "10s"},
            "executors": {
                "claude": {
                    "accounts": [{"name": "work", "config_dir": "/srv/claude"}, {"name": "me", "api_key_env": "K"}]
                },
                "codex": {"accounts": [{"name": "team", "codex_home": "codex-team"}]},
            },
        }
    )
    assert (s.dispatch.stall_timeout_ms, s.dispatch.fallback, s.dispatch.min_gate_ms) == (300_000, ("codex",), 10_000)
    assert s.claude.accounts == (
        Account("work", config_dir=Path("/srv/claude")),
        Account("me", api_key_env="K"),
    )
    assert s.codex.accounts == (Account("team", config_dir=HOME / "codex-team"),)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"dispatch": {"fallback": ["command"]}}, "[dispatch] fallback: expected a list of agent executors"),
        ({"dispatch": {"stall_timeout": 600}}, "[dispatch] stall_timeout: expected a duration"),
        (
            {"executors": {"claude": {"accounts": [{"name": "a"}]}}},
            "[executors.claude.accounts] a: expected one of config_dir or api_key_env",
        ),
        (
            {"executors": {"codex": {"accounts": [{"name": "a", "codex_home": "x", "api_key_env": "K"}]}}},
            "[executors.codex.accounts] a: expected one of codex_home or api_key_env",
        ),
        (
            {"executors": {"claude": {"accounts": [{"name": "a", "codex_home": "x"}]}}},
            "[executors.claude.accounts #1] unknown key 'codex_home'",
        ),
        ({"executors": {"claude": {"accounts": [{"config_dir": "x"}]}}}, "accounts #1] name: required"),
        (
            {"executors": {"claude": {"accounts": [{"name": "A B", "config_dir": "x"}]}}},
            "name: expected a name of lowercase letters",
        ),
        (
            {
                "executors": {
                    "claude": {"accounts": [{"name": "a", "config_dir": "x"}, {"name": "a", "config_dir": "y"}]}
                }
            },
            "accounts #2] name: expected a name no other account",
        ),
        ({"executors": {"claude": {"accounts": {"name": "a"}}}}, "[executors.claude] accounts: expected"),
    ],
)
def test_errors_name_the_file_and_the_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _settings(data)
    assert str(caught.value).startswith("vigil.toml")
    assert message in str(caught.value)


def _skill(tmp_path: Path, front: str) -> Path:
    folder = tmp_path / "skills" / "capped"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\ndescription: A capped skill.\n{front}---\nDo it.\n")
    return tmp_path / "skills"


def test_a_skill_may_bound_its_tasks_spend_and_forbid_fallback(tmp_path: Path) -> None:
    skill = load_skill(_skill(tmp_path, "max_cost_usd: 2\nfallback: false\n"), "capped")
    assert (skill.max_cost_usd, skill.fallback) == (2.0, False)
    plain = load_skill(_skill(tmp_path / "b", ""), "capped")
    assert (plain.max_cost_usd, plain.fallback) == (None, True)


@pytest.mark.parametrize(
    ("front", "message"),
    [("max_cost_usd: -1\n", "max_cost_usd: expected a number"), ("fallback: codex\n", "fallback: expected true")],
)
def test_bad_skill_keys_are_refused(tmp_path: Path, front: str, message: str) -> None:
    with pytest.raises(SkillError, match=message):
        load_skill(_skill(tmp_path, front), "capped")
