"""The ``claude`` executor: Claude Code in print mode with ``stream-json`` output.

argv = ``[executors.claude] command`` + ``--print --verbose --output-format
stream-json`` + ``--resume SESSION`` (an attempt that continues an earlier run's
session, its new message on stdin) + ``--model M`` (the task's model: skill, else config) +
``--max-budget-usd N`` (if configured) + ``--permission-mode M`` + Vigil's MCP
server for the run (``--mcp-config`` naming only it, ``--strict-mcp-config``, and
``--allowedTools mcp__vigil``) + ``--settings`` turning on the OS sandbox for Bash
(``dispatch.claude_sandbox``, where it can run) + one ``--allowedTools T`` /
``--disallowedTools T`` per rule + ``--add-dir D`` per folder + ``extra_args``. The
prompt goes on stdin, never into argv; the process runs in the agent's workspace,
where ``acceptEdits`` (the default) lets it edit files and nowhere else. The stream
is parsed as it arrives (``claude_stream``) and copied whole into the run's
transcript.

Cost is the CLI's ``total_cost_usd``; tokens are summed over ``modelUsage`` (every
model the run used), cache reads and writes kept apart; ``api_cost_usd`` is
recomputed from those tokens and ``[prices]``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dispatch.claude_sandbox import sandbox_problem, sandbox_settings
from dispatch.executors import DEFAULT_GRACE_S, RunContext
from dispatch.executors.answer import detail_of, summary_of
from dispatch.executors.child import ChildResult, StopRun, ended_early
from dispatch.executors.claude_stream import ClaudeStream, classify
from dispatch.executors.transcript import run_agent_cli
from dispatch.pricing import TokenUsage, api_cost_usd
from vigil.clock import SystemClock
from vigil.config import AgentCliSettings, Settings
from vigil.models import Outcome, OutcomeKind, Task

STREAM_FLAGS = ("--print", "--verbose", "--output-format", "stream-json")
VIGIL_TOOLS_RULE = "mcp__vigil"  # every tool of the MCP server named vigil
# Claude Code 2.1.197 in print mode connects the servers of --mcp-config in the
# background and sends the first request without waiting for them, except those
# marked alwaysLoad, for which it waits up to MCP_CONNECT_TIMEOUT_MS (default 5 s).
# Vigil's server is the agent's only way to report back, and a Python process may
# take longer than 5 s to start on a busy machine: marked, and waited for up to 60 s.
MCP_CONNECT_WAIT = ("MCP_CONNECT_TIMEOUT_MS", "60000")


def mcp_config(command: Sequence[str]) -> str:
    """``--mcp-config`` naming Vigil's server, started as ``command``."""
    server = {"command": command[0], "args": list(command[1:]), "alwaysLoad": True}
    return json.dumps({"mcpServers": {"vigil": server}})


def claude_argv(
    cli: AgentCliSettings,
    model: str | None,
    home: Path,
    *,
    mcp_command: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    writable_dirs: Sequence[Path] = (),
    resume: str | None = None,
) -> list[str]:
    """The full argv for one run (the prompt is not in it). ``mcp_command`` starts
    Vigil's MCP server (empty: none); ``env`` is the agent's environment, whose
    ``PATH`` decides whether the sandbox can run (None: no sandbox);
    ``writable_dirs`` are what the sandbox lets commands write besides the
    workspace; ``resume`` is the session to continue (``--resume``; None: a new
    one). Each rule and folder gets its own flag: the CLI's list options would
    swallow what follows them."""
    argv = [*cli.command, *STREAM_FLAGS]
    if resume is not None:
        argv += ["--resume", resume]
    if model:
        argv += ["--model", model]
    if cli.max_budget_usd is not None:
        argv += ["--max-budget-usd", f"{cli.max_budget_usd:g}"]
    argv += ["--permission-mode", cli.permission_mode]
    if mcp_command:
        argv += ["--mcp-config", mcp_config(mcp_command), "--strict-mcp-config", "--allowedTools", VIGIL_TOOLS_RULE]
    if env is not None and cli.bash_sandbox and sandbox_problem(env) is None:
        argv += ["--settings", json.dumps(sandbox_settings(env, writable_dirs))]
    for rule in cli.allowed_tools:
        argv += ["--allowedTools", rule]
    for rule in cli.disallowed_tools:
        argv += ["--disallowedTools", rule]
    for folder in cli.add_dirs:
        argv += ["--add-dir", str((home / Path(folder).expanduser()).resolve())]
    return argv + list(cli.extra_args)


class ClaudeExecutor:
    name = "claude"

    def __init__(
        self,
        settings: Settings,
        *,
        grace_s: float = DEFAULT_GRACE_S,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self.settings = settings
        self.grace_s = grace_s
        # only to read "resets 4:50pm (Zone)": the next such moment after now
        self.now_ms = now_ms or SystemClock().now_ms

    async def run(self, task: Task, ctx: RunContext) -> Outcome:
        model = ctx.model or self.settings.claude.model
        argv = claude_argv(
            self.settings.claude,
            model,
            ctx.home,
            mcp_command=ctx.mcp_command,
            env=ctx.env,
            writable_dirs=ctx.writable_dirs,
            resume=None if ctx.resume is None else ctx.resume.session_id,
        )
        if ctx.mcp_command:
            ctx = replace(ctx, env=dict([MCP_CONNECT_WAIT, *ctx.env.items()]))
        stream = ClaudeStream()
        result = await run_agent_cli(self.name, argv, ctx, self.grace_s, _watched(stream, ctx))
        return self._outcome(stream, result, ctx, model)

    def _outcome(self, stream: ClaudeStream, result: ChildResult, ctx: RunContext, model: str | None) -> Outcome:
        transcript_path = str(ctx.transcript_path)
        answer = stream.answer
        early = ended_early(result, ctx.timeout_s, transcript_path, ctx.stall_timeout_s)
        if early is not None:
            kind, error, retry_at, summary = early.kind, early.error, None, early.summary
        elif result.stopped and ctx.meter.over:
            kind, error, retry_at = OutcomeKind.OVER_BUDGET, ctx.meter.over_budget_error(), None
            summary = summary_of(error)
        else:
            verdict = classify(stream, result.exit_code, result.stderr, self.now_ms())
            kind, error, retry_at = verdict.kind, verdict.error, verdict.retry_at
            summary = summary_of(answer if kind is OutcomeKind.SUCCESS else (error or answer))
        usage = stream.usage_by_model()
        total = sum(usage.values(), TokenUsage())
        # without a result line (timed out, stalled, over budget) what was metered stands
        return ctx.meter.charge(
            Outcome(
                kind=kind,
                summary=summary,
                detail=detail_of(answer),
                error=error,
                exit_code=result.exit_code,
                cost_usd=stream.cost_usd,
                api_cost_usd=sum(api_cost_usd(self.settings.prices, name, tokens) for name, tokens in usage.items()),
                tokens_in=total.input,
                tokens_out=total.output,
                cache_read_tokens=total.cache_read,
                cache_write_tokens=total.cache_write,
                model=stream.model or next(iter(usage), None) or model,
                session_id=stream.session_id,
                transcript_path=transcript_path,
                retry_at=retry_at,
                permission_denials=stream.permission_denials,
                resume_refused=ctx.resume is not None and resume_refused(stream),
                limits=tuple(stream.limit_reports),
            )
        )


def resume_refused(stream: ClaudeStream) -> bool:
    """Whether Claude Code would not resume the session it was given: it ends with
    an error result before it starts one ("No conversation found with session ID:
    …", Claude Code 2.1.197), with no ``init`` line."""
    return stream.result is not None and bool(stream.result.get("is_error")) and not stream.started


def retry_note(retry: dict[str, Any]) -> str:
    """One line for people about the CLI's own retry: "API retry 3/10, next in 9 s
    (529 overloaded)"."""
    attempt, most = retry.get("attempt", "?"), retry.get("max_retries", "?")
    delay_ms = retry.get("retry_delay_ms")
    delay = f", next in {delay_ms / 1000:.0f} s" if isinstance(delay_ms, int | float) else ""
    why = " ".join(str(part) for part in (retry.get("error_status"), retry.get("error")) if part is not None)
    return f"API retry {attempt}/{most}{delay}" + (f" ({why})" if why else "")


def _watched(stream: ClaudeStream, ctx: RunContext) -> Callable[[bytes], None]:
    """``stream.feed``, plus what must happen while the run goes on: each message's
    usage metered (``ctx.meter``) and the run stopped once it passes its spending
    limit; the CLI's own retries reported through ``ctx.on_progress`` (cleared once
    the model answers); and the run stopped at the first retry of a refused key,
    which the CLI would otherwise retry for minutes."""

    def feed(raw: bytes) -> None:
        retry, answered, message = stream.last_retry, stream.answered, stream.last_message
        stream.feed(raw)
        if stream.last_message is not message and stream.last_message is not None:
            ctx.meter.record(*stream.last_message)
            if ctx.meter.over:
                raise StopRun
        if stream.auth_retry is not None:
            raise StopRun
        if stream.last_retry is not retry and stream.last_retry is not None:
            ctx.on_progress(retry_note(stream.last_retry))
        elif stream.answered != answered and stream.last_retry is not None:
            ctx.on_progress(None)

    return feed
