"""The claude executor against a fake Claude Code that prints the real stream-json
shapes: every scenario of the reference ends in the right ``Outcome``."""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from dispatch.agents.claude.executor import ClaudeExecutor, claude_argv
from dispatch.executors.answer import DETAIL_MAX_CHARS, SUMMARY_MAX_CHARS
from tests.dispatch.agent_support import (
    CLAUDE_FAKE,
    Started,
    agent_settings,
    fake_argv,
    make_ctx,
    make_task,
    recorded,
)
from vigil.config import Settings
from vigil.errors import ConfigError
from vigil.models import Outcome, OutcomeKind

RESET_MS = 1_767_225_600 * 1000
NOW_MS = 1_767_100_000_000  # 2025-12-30, before the fake's reset time


def claude_settings(home: Path, scenario: str, *options: str, **claude: object) -> Settings:
    command = fake_argv(CLAUDE_FAKE, scenario, *options)
    return agent_settings(home, executors={"claude": {"command": command, **claude}})


async def run_claude(home: Path, scenario: str, *options: str, prompt: str = "Do the task.", **kw: object) -> Outcome:
    settings = claude_settings(home, scenario, *options)
    executor = ClaudeExecutor(settings, grace_s=0.5, now_ms=lambda: NOW_MS)
    return await executor.run(make_task(), make_ctx(settings, prompt=prompt, **kw))  # type: ignore[arg-type]


async def test_success_reports_cost_tokens_of_every_model_and_the_answer(home: Path) -> None:
    record = home / "record.json"
    # without the OS sandbox (whether it can run depends on the machine: its own test below)
    settings = claude_settings(home, "success", "--record", str(record), max_budget_usd=2.5, bash_sandbox=False)
    started = Started()
    ctx = make_ctx(settings, prompt="Triage it.\nLine two", model="claude-opus-4-6", started=started)

    outcome = await ClaudeExecutor(settings, grace_s=0.5).run(make_task(), ctx)

    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.cost_usd == pytest.approx(0.032543)
    # two models in modelUsage: the main one and a helper
    assert outcome.tokens_in == 4 + 300
    assert outcome.tokens_out == 101 + 50
    assert outcome.cache_read_tokens == 38821
    assert outcome.cache_write_tokens == 1694 + 100
    opus = (4 * 5 + 101 * 25 + 38821 * 0.5 + 1694 * 6.25) / 1e6
    haiku = (300 * 1 + 50 * 5 + 100 * 1.25) / 1e6
    assert outcome.api_cost_usd == pytest.approx(opus + haiku)
    assert outcome.model == "claude-opus-4-6"
    assert outcome.session_id == "f9356e8d-5c2b-4a11-9d0b-7f3c2e1a0b9c"
    assert outcome.exit_code == 0
    assert outcome.summary == "Done: the inbox is triaged. Three items closed."
    assert outcome.detail == "Done: the inbox is triaged.\n\nThree items closed."
    assert outcome.error is None
    assert outcome.transcript_path == str(ctx.transcript_path)

    seen = recorded(record)
    assert seen["stdin"] == "Triage it.\nLine two"
    assert seen["argv"][4:] == [
        "--print", "--verbose", "--output-format", "stream-json",
        "--model", "claude-opus-4-6", "--max-budget-usd", "2.5",
        "--permission-mode", "acceptEdits",
        "--disallowedTools", "Bash(vigil:*)", "--disallowedTools", "Bash(sqlite3:*)",
    ]  # fmt: skip
    assert seen["cwd"] == str(home)
    assert started.calls == [(seen["pid"], seen["pid"], started.calls[0][2])]
    assert started.calls[0][2] is not None


async def test_transcript_holds_the_prompt_and_every_line_and_is_private(home: Path) -> None:
    settings = claude_settings(home, "success")
    ctx = make_ctx(settings, prompt="the prompt")
    await ClaudeExecutor(settings).run(make_task(), ctx)

    lines = [json.loads(line) for line in ctx.transcript_path.read_text().splitlines()]
    assert lines[0]["type"] == "vigil.prompt"
    assert lines[0]["text"] == "the prompt"
    types = [line["type"] for line in lines[1:]]
    assert types == ["system", "rate_limit_event", "assistant", "assistant", "user", "assistant", "result", "vigil.end"]
    assert stat.S_IMODE(ctx.transcript_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(ctx.transcript_path.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("scenario", "kind", "error_part"),
    [
        ("overloaded", OutcomeKind.TRANSIENT, "529"),
        ("auth", OutcomeKind.AUTH, "HTTP 401"),  # stopped at the first retry of the refused key
        ("not_logged_in", OutcomeKind.AUTH, "Not logged in"),
        ("max_turns", OutcomeKind.TURNS, "maximum number of turns"),
        ("budget", OutcomeKind.BUDGET, "maximum budget"),
        ("prompt_too_long", OutcomeKind.CONTEXT, "too long"),
        ("crash", OutcomeKind.TRANSIENT, "no result line"),
    ],
)
async def test_failures_are_classified(home: Path, scenario: str, kind: OutcomeKind, error_part: str) -> None:
    outcome = await run_claude(home, scenario)
    assert outcome.kind is kind
    assert outcome.error is not None
    assert error_part in outcome.error
    assert outcome.summary
    assert len(outcome.summary) <= SUMMARY_MAX_CHARS
    assert outcome.retry_at is None


async def test_overload_costs_nothing_and_names_the_exit_code(home: Path) -> None:
    outcome = await run_claude(home, "overloaded")
    assert outcome.cost_usd == 0
    assert outcome.exit_code == 1


async def test_turns_and_budget_still_count_tokens(home: Path) -> None:
    outcome = await run_claude(home, "budget")
    assert outcome.cost_usd == pytest.approx(2.01)
    assert outcome.tokens_in == 304
    turns = await run_claude(home, "max_turns")
    assert turns.tokens_out == 151
    assert turns.detail == "Working on it."  # the result text is empty: the last assistant text


async def test_crash_keeps_the_partial_stream_and_stderr_in_the_transcript(home: Path) -> None:
    settings = claude_settings(home, "crash")
    ctx = make_ctx(settings)
    outcome = await ClaudeExecutor(settings).run(make_task(), ctx)
    assert outcome.exit_code == 1
    assert outcome.detail == "Starting…"  # the last complete assistant text
    text = ctx.transcript_path.read_text()
    assert '{"type":"assistant","message":{"content":[{"type":"te' in text
    assert "ECONNRESET" in text


async def test_usage_limit_event_gives_the_reset_time(home: Path) -> None:
    outcome = await run_claude(home, "usage_limit")
    assert outcome.kind is OutcomeKind.USAGE_LIMITED
    assert outcome.retry_at == RESET_MS


async def test_usage_limit_old_text_form_counts_even_with_exit_0(home: Path) -> None:
    outcome = await run_claude(home, "usage_limit_old")
    assert outcome.exit_code == 0
    assert outcome.kind is OutcomeKind.USAGE_LIMITED
    assert outcome.retry_at == RESET_MS


async def test_usage_limit_prose_reset_is_read_in_its_zone(home: Path) -> None:
    outcome = await run_claude(home, "usage_limit_prose")
    assert outcome.kind is OutcomeKind.USAGE_LIMITED
    zone = ZoneInfo("America/Denver")
    now = datetime.fromtimestamp(NOW_MS / 1000, tz=zone)
    # the end of the minute it names (the CLI cut the reset down to it), on the nearest day
    expected = now.replace(hour=16, minute=51, second=0, microsecond=0)
    if expected <= now - timedelta(hours=1):
        expected += timedelta(days=1)
    assert outcome.retry_at == int(expected.timestamp() * 1000)
    assert outcome.retry_at > NOW_MS


async def test_noise_lines_unknown_types_and_bad_utf8_are_tolerated(home: Path) -> None:
    settings = claude_settings(home, "noise")
    ctx = make_ctx(settings)
    outcome = await ClaudeExecutor(settings).run(make_task(), ctx)
    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.summary == "All good."
    assert outcome.tokens_in == 304
    raw = ctx.transcript_path.read_bytes()
    assert b"\xff\xfe not utf-8 \xc3" in raw  # the transcript keeps bytes as they came
    assert b"Claude Code v2.1.3" in raw


async def test_a_10_mb_answer_is_capped_in_the_outcome_but_whole_in_the_transcript(home: Path) -> None:
    settings = claude_settings(home, "big")
    ctx = make_ctx(settings)
    outcome = await ClaudeExecutor(settings).run(make_task(), ctx)
    assert outcome.kind is OutcomeKind.SUCCESS
    assert len(outcome.summary) <= SUMMARY_MAX_CHARS
    assert outcome.detail.startswith("A" * 1000)
    assert len(outcome.detail) < DETAIL_MAX_CHARS + 200
    assert "more characters cut" in outcome.detail
    result = json.loads(ctx.transcript_path.read_text().splitlines()[-2])
    assert result["type"] == "result"
    assert len(result["result"]) == 10 * 1024 * 1024
    assert result["result"].endswith("THE-END-XY")


async def test_a_missing_binary_is_a_clear_failure(home: Path) -> None:
    settings = agent_settings(home, executors={"claude": {"command": [str(home / "no-such-claude")]}})
    outcome = await ClaudeExecutor(settings).run(make_task(), make_ctx(settings))
    assert outcome.kind is OutcomeKind.REFUSED  # every task would fail alike: the loop is gated
    assert outcome.error is not None
    assert "cannot start" in outcome.error
    assert "no-such-claude" in outcome.error


async def test_model_falls_back_to_config_and_extra_args_come_last(home: Path) -> None:
    settings = agent_settings(
        home, executors={"claude": {"command": ["claude"], "model": "claude-sonnet-4-5", "extra_args": ["--x"]}}
    )
    assert claude_argv(settings.claude, None, home) == [
        "claude", "--print", "--verbose", "--output-format", "stream-json",
        "--permission-mode", "acceptEdits",
        "--disallowedTools", "Bash(vigil:*)", "--disallowedTools", "Bash(sqlite3:*)", "--x",
    ]  # fmt: skip
    record = home / "r.json"
    settings = claude_settings(home, "success", "--record", str(record), model="claude-sonnet-4-5")
    await ClaudeExecutor(settings).run(make_task(), make_ctx(settings, model=None))
    argv = recorded(record)["argv"]
    assert argv[argv.index("--model") + 1] == "claude-sonnet-4-5"


async def test_the_agent_gets_a_minimal_environment(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_TEST_SECRET", "hunter2")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    record = home / "r.json"
    command = fake_argv(CLAUDE_FAKE, "success", "--record", str(record))
    settings = agent_settings(
        home, executors={"claude": {"command": command}}, dispatch={"pass_env": ["ANTHROPIC_API_KEY"]}
    )
    await ClaudeExecutor(settings).run(make_task(), make_ctx(settings, task_id=7, run_id=11))
    env = recorded(record)["env"]
    assert "VIGIL_TEST_SECRET" not in env
    assert env["ANTHROPIC_API_KEY"] == "sk-test"
    assert env["VIGIL_HOME"] == str(home)
    assert env["VIGIL_TASK_ID"] == "7"
    assert env["VIGIL_RUN_ID"] == "11"
    allowed = {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "ANTHROPIC_API_KEY", "VIGIL_HOME", "VIGIL_TASK_ID"}
    allowed |= {"VIGIL_RUN_ID", "LC_CTYPE", "PWD", "SHLVL", "_", "__CF_USER_TEXT_ENCODING"}
    assert set(env) <= allowed, set(env) - allowed


async def test_shell_syntax_in_task_text_reaches_the_agent_verbatim_and_runs_nothing(home: Path) -> None:
    record = home / "r.json"
    subject = "$(touch pwned) `touch pwned2` \"quoted\" 'single'\nsecond line; touch pwned3"
    settings = claude_settings(home, "echo", "--record", str(record))
    outcome = await ClaudeExecutor(settings).run(make_task(subject=subject), make_ctx(settings, prompt=subject))
    assert recorded(record)["stdin"] == subject
    assert outcome.detail == subject
    for name in ("pwned", "pwned2", "pwned3"):
        assert not (home / name).exists()
        assert not Path(os.getcwd(), name).exists()
    assert all(subject not in arg for arg in recorded(record)["argv"])


def test_permission_keys_become_one_flag_per_rule_and_folder(home: Path) -> None:
    claude = {
        "command": ["claude"],
        "permission_mode": "dontAsk",
        "allowed_tools": ["Bash(vigil task:*)", "Bash(git log:*)"],
        "disallowed_tools": ["WebFetch"],
        "add_dirs": ["repo", "/srv/data"],
    }
    settings = agent_settings(home, executors={"claude": claude})
    assert claude_argv(settings.claude, None, home)[5:] == [
        "--permission-mode", "dontAsk",
        "--allowedTools", "Bash(vigil task:*)", "--allowedTools", "Bash(git log:*)",
        "--disallowedTools", "WebFetch",
        "--add-dir", str((home / "repo").resolve()), "--add-dir", "/srv/data",
    ]  # fmt: skip


def test_vigils_server_and_the_sandbox_go_in_before_the_operators_rules(home: Path) -> None:
    tools = home / "bin"  # where this "machine" has bubblewrap and socat
    tools.mkdir()
    for name in ("bwrap", "socat"):
        (tools / name).write_text("#!/bin/sh\n")
        (tools / name).chmod(0o755)
    settings = agent_settings(home, executors={"claude": {"command": ["claude"], "allowed_tools": ["Bash(make:*)"]}})
    server = ("/venv/bin/python", "-m", "vigil", "--home", str(home), "mcp", "--run", "7")
    env = {"PATH": str(tools), "VIGIL_STORE_URL": "postgresql://vigil:secret@db/vigil"}
    argv = claude_argv(settings.claude, None, home, mcp_command=server, env=env)
    config = json.loads(argv[argv.index("--mcp-config") + 1])
    # alwaysLoad: Claude Code waits for it before the first request
    assert config == {"mcpServers": {"vigil": {"command": server[0], "args": list(server[1:]), "alwaysLoad": True}}}
    assert argv[argv.index("--mcp-config") + 2 :][:3] == ["--strict-mcp-config", "--allowedTools", "mcp__vigil"]
    sandbox = json.loads(argv[argv.index("--settings") + 1])["sandbox"]
    assert sandbox["enabled"]
    assert sandbox["autoAllowBashIfSandboxed"]
    assert sandbox["failIfUnavailable"]
    assert sandbox["allowUnsandboxedCommands"] is False  # the model cannot ask to leave it
    # the store's URL is for Vigil's server, not for the agent's shell
    assert sandbox["credentials"] == {"envVars": [{"name": "VIGIL_STORE_URL", "mode": "deny"}]}
    assert argv.index("--settings") < argv.index("Bash(make:*)")
    # no bubblewrap on PATH: no sandbox settings, and Bash goes by the allow rules alone
    bare = claude_argv(settings.claude, None, home, mcp_command=server, env={"PATH": str(home)})
    assert "--settings" not in bare
    assert "--mcp-config" in bare


def test_an_unknown_permission_mode_is_a_config_error(home: Path) -> None:
    with pytest.raises(ConfigError, match=r"executors\.claude.*permission_mode"):
        agent_settings(home, executors={"claude": {"permission_mode": "yolo"}})
