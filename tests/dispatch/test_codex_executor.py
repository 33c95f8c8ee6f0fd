"""The codex executor against a fake ``codex exec --json``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from dispatch.agents.codex.executor import CodexExecutor, codex_argv, home_under_tmp, tmp_taken_away, writable_dirs
from tests.dispatch.agent_support import CODEX_FAKE, agent_settings, fake_argv, make_ctx, make_task, recorded
from vigil.config import Settings
from vigil.errors import ConfigError
from vigil.models import OutcomeKind


def codex_settings(home: Path, scenario: str, *options: str, **codex: object) -> Settings:
    return agent_settings(home, executors={"codex": {"command": fake_argv(CODEX_FAKE, scenario, *options), **codex}})


async def test_success_over_two_turns_sums_usage_and_prices_it(home: Path) -> None:
    record = home / "r.json"
    settings = codex_settings(home, "success", "--record", str(record))
    ctx = make_ctx(settings, prompt="Summarise the feeds.", model="gpt-5-codex")

    outcome = await CodexExecutor(settings).run(make_task(), ctx)

    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.summary == "Final: all three feeds summarised."  # the last agent_message
    # input_tokens include the cached ones, which are counted apart
    assert outcome.tokens_in == (37067 - 26880) + (1000 - 500)
    assert outcome.cache_read_tokens == 26880 + 500
    assert outcome.tokens_out == 850 + 150
    assert outcome.cache_write_tokens == 0
    expected = ((37067 - 26880 + 500) * 1.25 + 1000 * 10.0 + (26880 + 500) * 0.125) / 1e6
    assert outcome.api_cost_usd == pytest.approx(expected)
    assert outcome.cost_usd == pytest.approx(expected)
    assert outcome.model == "gpt-5-codex"
    assert outcome.session_id == "01a03463"
    seen = recorded(record)
    assert seen["stdin"] == "Summarise the feeds."
    assert seen["argv"][4:9] == ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write"]
    assert seen["argv"][11:13] == ["--model", "gpt-5-codex"]
    lines = ctx.transcript_path.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "vigil.prompt"
    assert sum(1 for line in lines if '"turn.completed"' in line) == 2


async def test_unpriced_model_costs_zero_and_still_succeeds(home: Path) -> None:
    settings = codex_settings(home, "success")
    outcome = await CodexExecutor(settings).run(make_task(), make_ctx(settings, model="some-new-model"))
    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.cost_usd == 0
    assert outcome.tokens_out == 1000


async def test_turn_failed_is_transient_with_the_message(home: Path) -> None:
    settings = codex_settings(home, "turn_failed")
    outcome = await CodexExecutor(settings).run(make_task(), make_ctx(settings))
    assert outcome.kind is OutcomeKind.TRANSIENT
    assert outcome.error == "stream disconnected before completion"
    assert outcome.exit_code == 1


async def test_usage_limit_is_read_with_its_reset_time(home: Path) -> None:
    settings = codex_settings(home, "usage_limit")
    outcome = await CodexExecutor(settings).run(make_task(), make_ctx(settings))
    assert outcome.kind is OutcomeKind.USAGE_LIMITED
    assert outcome.retry_at == int(datetime(2026, 4, 11, 14, 33).timestamp() * 1000)  # the end of the minute


async def test_noise_lines_are_tolerated(home: Path) -> None:
    settings = codex_settings(home, "noise")
    outcome = await CodexExecutor(settings).run(make_task(), make_ctx(settings))
    assert outcome.kind is OutcomeKind.SUCCESS


async def test_a_crash_without_events_is_transient(home: Path) -> None:
    settings = codex_settings(home, "exit", "--exit", "3")
    outcome = await CodexExecutor(settings).run(make_task(), make_ctx(settings))
    assert outcome.kind is OutcomeKind.TRANSIENT
    assert outcome.exit_code == 3


def test_argv_has_exec_json_sandbox_model_dirs_then_extra_args(home: Path) -> None:
    settings = agent_settings(home, executors={"codex": {"command": ["codex"], "extra_args": ["--oss"]}})
    start = ["codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write"]
    no_login = ["-c", "allow_login_shell=false"]
    assert codex_argv(settings.codex, "o4", [Path("/db")]) == [
        *start,
        *no_login,
        "--model",
        "o4",
        "-c",
        "sandbox_workspace_write.network_access=true",
        "--add-dir",
        "/db",
        "--oss",
    ]
    network = ["-c", "sandbox_workspace_write.network_access=true"]
    assert codex_argv(settings.codex, None) == [*start, *no_login, *network, "--oss"]


def test_add_dirs_go_only_to_the_sandbox_that_reads_them(home: Path) -> None:
    settings = agent_settings(home, executors={"codex": {"command": ["codex"], "sandbox": "read-only"}})
    argv = codex_argv(settings.codex, None, [Path("/db")])
    assert argv[4:6] == ["--sandbox", "read-only"]
    assert "--add-dir" not in argv
    assert "sandbox_workspace_write.network_access=true" not in argv


def test_only_add_dirs_outside_the_workspace_are_added_never_the_database(home: Path, tmp_path: Path) -> None:
    settings = agent_settings(home, executors={"codex": {"add_dirs": ["notes", "notes", "/srv/shared"]}})
    # notes/ is in the home, the workspace here: nothing to add for it
    assert writable_dirs(settings, home) == [Path("/srv/shared")]
    repo = tmp_path / "repo"
    assert writable_dirs(settings, repo) == [(home / "notes").resolve(), Path("/srv/shared")]
    assert settings.store.path.parent not in writable_dirs(settings, repo)


def test_vigils_server_gets_the_agents_variables_and_the_shell_does_not_get_the_store_url(home: Path) -> None:
    settings = agent_settings(home, executors={"codex": {"command": ["codex"]}})
    server = ("/venv/bin/python", "-m", "vigil", "--home", str(home), "mcp", "--run", "7")
    env = {"PATH": "/usr/bin", "OPENAI_API_KEY": "sk", "VIGIL_STORE_URL": "postgresql://vigil:secret@db/vigil"}
    argv = codex_argv(settings.codex, None, mcp_command=server, env=env, no_tmp=True)
    pairs = dict(arg.split("=", 1) for arg in argv[argv.index("-c") :] if "=" in arg and not arg.startswith("-"))
    assert json.loads(pairs["mcp_servers.vigil.command"]) == server[0]
    assert json.loads(pairs["mcp_servers.vigil.args"]) == list(server[1:])
    assert json.loads(pairs["mcp_servers.vigil.env_vars"]) == ["OPENAI_API_KEY", "PATH", "VIGIL_STORE_URL"]
    assert pairs["mcp_servers.vigil.default_tools_approval_mode"] == '"approve"'
    assert pairs["mcp_servers.vigil.required"] == "true"
    assert json.loads(pairs["shell_environment_policy.exclude"]) == ["VIGIL_STORE_URL"]
    # the home is under /tmp: the sandbox's /tmp and $TMPDIR are taken away
    assert pairs["sandbox_workspace_write.exclude_slash_tmp"] == "true"
    assert pairs["sandbox_workspace_write.exclude_tmpdir_env_var"] == "true"
    assert not any(value.startswith("postgresql://") for value in argv)  # the URL itself is never in argv


def test_a_home_under_the_temporary_folders_is_told_apart(tmp_path: Path) -> None:
    assert home_under_tmp(Path("/tmp/agent-home"), {})
    assert home_under_tmp(tmp_path / "t" / "home", {"TMPDIR": str(tmp_path / "t")})
    assert not home_under_tmp(Path("/srv/agent-home"), {"TMPDIR": str(tmp_path)})


def test_an_unknown_sandbox_is_a_config_error(home: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[executors.codex\] sandbox: expected one of 'read-only'"):
        agent_settings(home, executors={"codex": {"sandbox": "none"}})


async def test_a_missing_binary_is_a_refusal_not_a_task_failure(home: Path) -> None:
    settings = agent_settings(home, executors={"codex": {"command": ["no-such-codex-here"]}})
    outcome = await CodexExecutor(settings).run(make_task(), make_ctx(settings))
    assert outcome.kind is OutcomeKind.REFUSED
    assert "no-such-codex-here" in str(outcome.error)


def test_tmp_is_taken_away_when_the_tasks_repository_lies_there() -> None:
    assert tmp_taken_away(Path("/srv/agent-home"), Path("/tmp/project"), {})
    assert not tmp_taken_away(Path("/srv/agent-home"), Path("/srv/project"), {})
    assert not tmp_taken_away(Path("/srv/agent-home"), None, {})
