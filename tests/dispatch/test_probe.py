"""What ``vigil doctor --probe`` probes and says it costs (``dispatch.agents.probe``); the
probes themselves run the real CLIs in tests/agents/test_doctor_probe.py."""

from __future__ import annotations

from pathlib import Path

from dispatch.agents.claude.probe import limit_text
from dispatch.agents.doctor import cost_note, probe_targets
from vigil.config import load_settings
from vigil.home import init_home

ACCOUNTS = """
[dispatch]
executor = "claude"
fallback = ["codex"]

[[executors.claude.accounts]]
name = "work"
config_dir = "{folder}"

[[executors.claude.accounts]]
name = "spare"
api_key_env = "SPARE_KEY"
"""


def test_every_account_of_the_executor_and_its_fallbacks_is_probed_as_a_run_would_use_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    folder = tmp_path / "claude-work"
    (home / "vigil.toml").write_text(ACCOUNTS.format(folder=folder))
    settings = load_settings(home)
    source = {
        "PATH": "/bin",
        "HOME": str(tmp_path),
        "ANTHROPIC_API_KEY": "sk-ant-operator",
        "SPARE_KEY": "sk-ant-spare",
    }

    found = probe_targets(settings, source)

    assert [t.name for t in found] == ["claude:work", "claude:spare", "codex:default"]
    work, spare, _ = found
    # each with its own credentials only: the operator's key never speaks for another account
    assert work.env["CLAUDE_CONFIG_DIR"] == str(folder)
    assert "ANTHROPIC_API_KEY" not in work.env
    assert spare.env["ANTHROPIC_API_KEY"] == "sk-ant-spare"
    note = cost_note(settings, source)
    assert note.startswith("probe: one live request per account (3: claude:work, claude:spare, codex:default)")
    assert "~2,000 input tokens with claude" in note
    assert "~10,000 input tokens with codex" in note


def test_a_home_without_an_agent_cli_has_nothing_to_probe(tmp_path: Path) -> None:
    init_home(tmp_path / "home")
    settings = load_settings(tmp_path / "home")  # dry-run, as a new home has it
    assert probe_targets(settings, {"PATH": "/bin"}) == []
    assert cost_note(settings, {"PATH": "/bin"}) == "probe: the executor 'dry-run' has no agent CLI to probe"


def test_claude_codes_limit_state_is_said_by_kind_reset_and_use() -> None:
    info = {"status": "allowed_warning", "rateLimitType": "seven_day", "resetsAt": 1_796_425_235, "utilization": 0.82}
    assert limit_text(info) == "limit allowed_warning (seven_day, resets 2026-12-04T23:00:35Z, 82% used)"
    assert limit_text({"status": "allowed"}) == "limit allowed"
    assert limit_text(None) == "no limit state reported"
