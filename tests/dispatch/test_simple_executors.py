"""dry-run, FakeExecutor and the executor factory."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from dispatch.agents.claude.executor import ClaudeExecutor
from dispatch.agents.codex.executor import CodexExecutor
from dispatch.executors import RunContext, build_executor
from dispatch.executors.command import CommandExecutor
from dispatch.executors.dryrun import DryRunExecutor
from dispatch.executors.fake import FakeExecutor
from tests.dispatch.agent_support import agent_settings, make_ctx, make_task
from vigil.errors import ConfigError
from vigil.models import Outcome, OutcomeKind, Task


async def test_dry_run_keeps_the_prompt_as_the_transcript_and_spends_nothing(home: Path) -> None:
    settings = agent_settings(home)
    prompt = "# The task\n\nSubject: x ünïcode\n"
    ctx = make_ctx(settings, prompt=prompt)
    outcome = await DryRunExecutor().run(make_task(), ctx)
    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.summary == f"dry run: prompt of {len(prompt)} chars built, nothing executed"
    assert (outcome.cost_usd, outcome.api_cost_usd, outcome.tokens_in, outcome.tokens_out) == (0, 0, 0, 0)
    assert outcome.transcript_path == str(ctx.transcript_path)
    (line,) = ctx.transcript_path.read_text(encoding="utf-8").splitlines()
    record = json.loads(line)
    assert record["type"] == "vigil.prompt"
    assert record["text"] == prompt
    assert stat.S_IMODE(ctx.transcript_path.stat().st_mode) == 0o600


async def test_a_rerun_overwrites_a_leftover_transcript_and_fixes_its_mode(home: Path) -> None:
    settings = agent_settings(home)
    ctx = make_ctx(settings, prompt="new")
    ctx.transcript_path.parent.mkdir(parents=True, mode=0o755)
    ctx.transcript_path.write_text("old junk\n" * 100)
    ctx.transcript_path.chmod(0o644)
    await DryRunExecutor().run(make_task(), ctx)
    assert "old junk" not in ctx.transcript_path.read_text()
    assert stat.S_IMODE(ctx.transcript_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(ctx.transcript_path.parent.stat().st_mode) == 0o700


async def test_fake_executor_records_calls_with_sync_and_async_handlers(home: Path) -> None:
    ctx = make_ctx(agent_settings(home))
    sync = FakeExecutor(lambda task, c: Outcome(kind=OutcomeKind.SUCCESS, summary=task.subject))
    assert (await sync.run(make_task(subject="s"), ctx)).summary == "s"

    async def handler(task: Task, c: RunContext) -> Outcome:
        return Outcome(kind=OutcomeKind.FAILED, error=c.prompt)

    fake = FakeExecutor(handler)
    outcome = await fake.run(make_task(id=1), ctx)
    await fake.run(make_task(id=2), ctx)
    assert outcome.error == ctx.prompt
    assert [task.id for task, _ in fake.calls] == [1, 2]
    assert fake.calls[0][1] is ctx


def test_factory_builds_each_configured_executor(home: Path) -> None:
    settings = agent_settings(home)
    assert isinstance(build_executor("claude", settings), ClaudeExecutor)
    assert isinstance(build_executor("codex", settings), CodexExecutor)
    command = build_executor("command", settings, grace_s=0.5)
    assert isinstance(command, CommandExecutor)
    assert command.grace_s == 0.5
    assert isinstance(build_executor("dry-run", settings), DryRunExecutor)
    for name in ("claude", "codex", "command", "dry-run"):
        assert build_executor(name, settings).name == name
    with pytest.raises(ConfigError, match="unknown executor 'gpt'"):
        build_executor("gpt", settings)
