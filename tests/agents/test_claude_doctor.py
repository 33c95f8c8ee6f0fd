"""`vigil doctor` runs the configured Claude Code for real and says what to do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.agents.clis import needs_bwrap, needs_claude
from tests.agents.homes import ClaudeHome

pytestmark = [needs_claude, pytest.mark.slow]

NO_SERVER = "http://127.0.0.1:9"  # doctor never calls the model


def lines_of(output: str, what: str) -> list[str]:
    return [line for line in output.splitlines() if line.split()[1:2] == [what]]


def test_a_working_claude_with_a_key_is_ok(tmp_path: Path) -> None:
    home = ClaudeHome.make(tmp_path, NO_SERVER)
    proc = home.vigil("doctor", GITHUB_TOKEN="ghp-not-for-the-agent")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines_of(proc.stdout, "claude") == ["ok    claude     2.1.197 (Claude Code)"]
    (login,) = lines_of(proc.stdout, "login")
    assert login.startswith("ok")
    assert "api_key" in login
    assert "ANTHROPIC_API_KEY" in login
    (env,) = lines_of(proc.stdout, "env")
    assert env.startswith("warn")
    assert "GITHUB_TOKEN" in env
    assert "ghp-not-for-the-agent" not in proc.stdout
    (loop,) = lines_of(proc.stdout, "loop") or [""]
    assert loop == "" or loop.startswith("ok")


def test_no_key_and_no_login_fails_with_what_to_do(tmp_path: Path) -> None:
    home = ClaudeHome.make(tmp_path, NO_SERVER)
    env = home.env()
    del env["ANTHROPIC_API_KEY"]
    proc = home.vigil_with_env("doctor", env=env)
    assert proc.returncode == 1
    (login,) = lines_of(proc.stdout, "login")
    assert login.startswith("FAIL")
    assert "export ANTHROPIC_API_KEY" in login


def test_a_missing_binary_and_a_gated_loop_are_reported(tmp_path: Path) -> None:
    home = ClaudeHome.make(tmp_path, NO_SERVER, claude={"command": [str(tmp_path / "no-claude")]})
    assert home.vigil("pause", "--reason", "fixing the key").returncode == 0
    proc = home.vigil("doctor")
    assert proc.returncode == 1
    (claude,) = lines_of(proc.stdout, "claude")
    assert claude.startswith("FAIL")
    assert "npm install -g @anthropic-ai/claude-code" in claude
    (loop,) = lines_of(proc.stdout, "loop")
    assert loop.startswith("warn")
    assert "fixing the key" in loop
    assert "vigil resume" in loop


@pytest.mark.skipif(os.geteuid() != 0, reason="bypassPermissions is refused only as root")
def test_bypass_permissions_as_root_fails(tmp_path: Path) -> None:
    home = ClaudeHome.make(tmp_path, NO_SERVER, claude={"permission_mode": "bypassPermissions"})
    proc = home.vigil("doctor")
    assert proc.returncode == 1
    assert any(line.startswith("FAIL") and "refused as root" in line for line in lines_of(proc.stdout, "claude"))


@needs_bwrap
def test_a_new_home_reports_its_workspace_sandbox_and_prices(tmp_path: Path) -> None:
    home = ClaudeHome.initialised(tmp_path, NO_SERVER)
    proc = home.vigil("doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines_of(proc.stdout, "workspace") == [
        f"ok    workspace  each task works in a folder of its own under {home.path / 'work'}, kept 7 d after it ends"
    ]
    assert lines_of(proc.stdout, "sandbox") == [
        "ok    sandbox    claude: Bash runs in Claude Code's OS sandbox, writing only in the workspace"
    ]
    assert lines_of(proc.stdout, "prices") == [
        "ok    prices     claude: each run is priced by Claude Code's own total_cost_usd"
    ]
    assert lines_of(proc.stdout, "reach") == []  # nothing widened


def test_settings_that_widen_the_agents_reach_are_named(tmp_path: Path) -> None:
    home = ClaudeHome.make(
        tmp_path,
        NO_SERVER,
        dispatch={"workdir": "."},
        claude={"bash_sandbox": False, "allowed_tools": ["Bash"], "add_dirs": [".."]},
    )
    proc = home.vigil("doctor")
    reach = lines_of(proc.stdout, "reach")
    assert all(line.startswith("warn") for line in reach), reach
    assert any("[dispatch] workdir" in line and "contains the home" in line for line in reach), reach
    assert any("Bash is allowed without Claude Code's sandbox" in line for line in reach), reach
    assert any("add_dirs '..' contains the home" in line for line in reach), reach
    (sandbox,) = lines_of(proc.stdout, "sandbox")
    assert sandbox.startswith("warn")
    assert "bash_sandbox is off" in sandbox


def test_each_fallback_and_each_account_is_checked_as_the_configured_executor_is(tmp_path: Path) -> None:
    (tmp_path / "bare").mkdir()  # a login folder nobody logged in to
    accounts = (
        f'\n[executors.codex]\ncommand = ["{tmp_path / "no-codex"}"]\n'
        '\n[[executors.claude.accounts]]\nname = "keyed"\napi_key_env = "ANTHROPIC_API_KEY"\n'
        f'\n[[executors.claude.accounts]]\nname = "bare"\nconfig_dir = "{tmp_path / "bare"}"\n'
    )
    home = ClaudeHome.make(tmp_path, NO_SERVER, dispatch={"fallback": ["codex"]}, toml=accounts)
    proc = home.vigil("doctor")
    assert proc.returncode == 1, proc.stdout
    assert lines_of(proc.stdout, "claude")[0] == "ok    claude     claude:keyed: 2.1.197 (Claude Code)"
    keyed, bare = lines_of(proc.stdout, "login")
    assert keyed.startswith("ok    login      claude:keyed: logged in")
    assert bare.startswith("FAIL  login      claude:bare: Claude Code is not logged in for the agent")
    (codex,) = lines_of(proc.stdout, "codex")
    assert codex.startswith(f"FAIL  codex      codex (fallback): '{tmp_path / 'no-codex'}' does not run")
    assert "npm install -g @openai/codex" in codex
