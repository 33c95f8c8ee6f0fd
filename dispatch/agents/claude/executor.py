"""The ``claude`` executor: Claude Code in print mode with ``stream-json`` output.

argv = ``[executors.claude] command`` + ``--print --verbose --output-format
stream-json`` + ``--resume SESSION`` (an attempt that continues an earlier run's
session, its new message on stdin) + ``--model M`` (the task's model: skill, else config) +
``--max-budget-usd N`` (if configured) + ``--permission-mode M`` + Vigil's MCP
server for the run (``--mcp-config`` naming only it, ``--strict-mcp-config``, and
``--allowedTools mcp__vigil``) + ``--settings`` turning on the OS sandbox for Bash
(``dispatch.agents.claude.sandbox``, where it can run) + one ``--allowedTools T`` /
``--disallowedTools T`` per rule + ``--add-dir D`` per folder + ``extra_args``. The
prompt goes on stdin, never into argv; the process runs in the agent's workspace,
where ``acceptEdits`` (the default) lets it edit files and nowhere else. The stream
is parsed as it arrives (``claude_stream``) and copied whole into the run's
transcript.

Cost is the CLI's ``total_cost_usd``; tokens are summed over ``modelUsage`` (every
model the run used), cache reads and writes kept apart; ``api_cost_usd`` is
recomputed from those tokens and ``[prices]`` (else the table, else the model's
family's price). A run with a spending limit is metered from each message's usage
(``dispatch.meter``); a model named for it with no price in the table also gets
the limit as ``--max-budget-usd``, which Claude Code holds by its own running total
(its ``error_max_budget_usd`` is then ``over_budget``), and a run whose model turns
out to have no price at all (its ``init`` line names it) is ended there, at its
start, refused: its cap could not be metered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from dispatch.agents.claude.sandbox import sandbox_problem, sandbox_settings
from dispatch.agents.claude.stream import ClaudeStream, classify
from dispatch.agents.ending import AgentExecutor, Verdict
from dispatch.agents.pricing import TokenUsage, api_cost_usd, model_price
from dispatch.executors import RunContext
from dispatch.executors.child import ChildResult, StopRun
from dispatch.executors.transcript import run_agent_cli
from dispatch.meter import priced_by
from vigil import agent_clis
from vigil.config import AgentCliSettings
from vigil.models import Outcome, OutcomeKind, Task

STREAM_FLAGS = ("--print", "--verbose", "--output-format", "stream-json")
VIGIL_TOOLS_RULE = "mcp__vigil"  # every tool of the MCP server named vigil
# Claude Code 2.1.197 in print mode connects the servers of --mcp-config in the
# background and sends the first request without waiting for them, except those
# marked alwaysLoad, for which it waits up to MCP_CONNECT_TIMEOUT_MS (default 5 s).
# Vigil's server is the agent's only way to report back, and a Python process may
# take longer than 5 s to start on a busy machine: marked, and waited for up to 60 s.
MCP_CONNECT_WAIT = ("MCP_CONNECT_TIMEOUT_MS", "60000")
MIN_BUDGET_USD = 0.0001  # a limit already spent still starts the CLI, which stops at once
TOTAL_COST = agent_clis.CLAUDE.cost_figure or "total_cost_usd"


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
    spend_limit_usd: float | None = None,
) -> list[str]:
    """The full argv for one run (the prompt is not in it). ``mcp_command`` starts
    Vigil's MCP server (empty: none); ``env`` is the agent's environment, whose
    ``PATH`` decides whether the sandbox can run (None: no sandbox);
    ``writable_dirs`` are what the sandbox lets commands write besides the
    workspace; ``resume`` is the session to continue (``--resume``; None: a new
    one); ``spend_limit_usd`` a limit for the CLI to hold by its own running total
    (``--max-budget-usd``; with the configured one, the smaller). Each rule and
    folder gets its own flag: the CLI's list options would swallow what follows
    them."""
    argv = [*cli.command, *STREAM_FLAGS]
    if resume is not None:
        argv += ["--resume", resume]
    if model:
        argv += ["--model", model]
    budgets = [usd for usd in (cli.max_budget_usd, spend_limit_usd) if usd is not None]
    if budgets:
        argv += ["--max-budget-usd", f"{max(min(budgets), MIN_BUDGET_USD):g}"]
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


class ClaudeExecutor(AgentExecutor):
    name = "claude"

    async def run(self, task: Task, ctx: RunContext) -> Outcome:
        model = ctx.model or self.settings.claude.model
        cli_limit = self._cli_limit(ctx, model)
        argv = claude_argv(
            self.settings.claude,
            model,
            ctx.home,
            mcp_command=ctx.mcp_command,
            env=ctx.env,
            writable_dirs=ctx.writable_dirs,
            resume=None if ctx.resume is None else ctx.resume.session_id,
            spend_limit_usd=cli_limit,
        )
        if ctx.mcp_command:
            ctx = replace(ctx, env=dict([MCP_CONNECT_WAIT, *ctx.env.items()]))
        stream = ClaudeStream()
        result = await run_agent_cli(self.name, argv, ctx, self.grace_s, _watched(stream, ctx, cli_limit is not None))
        outcome = self.ended(result, ctx, stream.answer, partial(_verdict, stream, result, ctx, cli_limit))
        usage = stream.usage_by_model()
        total = sum(usage.values(), TokenUsage())
        figure = TOTAL_COST if stream.result is not None else None
        models = usage.keys() if usage else ctx.meter.usage_by_model().keys()
        # without a result line (timed out, stalled, over budget) what was metered stands
        return ctx.meter.charge(
            replace(
                outcome,
                cost_usd=stream.cost_usd,
                api_cost_usd=sum(api_cost_usd(self.settings.prices, name, tokens) for name, tokens in usage.items()),
                tokens_in=total.input,
                tokens_out=total.output,
                cache_read_tokens=total.cache_read,
                cache_write_tokens=total.cache_write,
                model=stream.model or next(iter(usage), None) or model,
                session_id=stream.session_id,
                permission_denials=stream.permission_denials,
                resume_refused=ctx.resume is not None and resume_refused(stream),
                priced_by=priced_by(self.settings.prices, models, figure),
                limits=tuple(stream.limit_reports),
            )
        )

    def _cli_limit(self, ctx: RunContext, model: str | None) -> float | None:
        """The run's limit for Claude Code to hold itself (``--max-budget-usd``):
        only for a model named for it that the table does not price (the meter
        prices it by its family at best), or None."""
        if ctx.meter.limit is None or model is None or model_price(self.settings.prices, model) is not None:
            return None
        return ctx.meter.limit.usd


def _verdict(
    stream: ClaudeStream, result: ChildResult, ctx: RunContext, cli_limit: float | None, now_ms: int
) -> Verdict:
    """How a run that ended of itself ended: by its stream (``classify``), but a
    run stopped at its start because its model cannot be metered is refused
    (under the daily budget) or failed, and one Claude Code stopped at the limit it
    held itself (``cli_limit``: its ``error_max_budget_usd`` at or past it) is
    ``over_budget``."""
    limit = ctx.meter.limit
    if result.stopped and stream.unmetered is not None and limit is not None:
        # the daily budget's cap meets every task alike: the loop waits for a person
        return Verdict(OutcomeKind.REFUSED if limit.daily else OutcomeKind.FAILED, stream.unmetered)
    found = classify(stream, result.exit_code, result.stderr, now_ms)
    if found.kind is not OutcomeKind.BUDGET or cli_limit is None or limit is None or stream.cost_usd < cli_limit:
        return found
    spent = f"${stream.cost_usd:.4f} by {TOTAL_COST}"
    error = f"over budget: Claude Code stopped the run at {spent}, past {limit.why}"
    return Verdict(OutcomeKind.OVER_BUDGET, error, found.retry_at)


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


def _unmetered(model: str | None, ctx: RunContext) -> str | None:
    """Why the run's limit cannot be metered for ``model`` (its ``init`` line's, when
    Claude Code was not given the limit to hold: no model was named for the run):
    it has no price, not even its family's; None when it can."""
    if model is None or not ctx.meter.unpriced(model):
        return None
    return (
        f"Claude Code chose model {model!r}, which has no price (add [prices.{model!r}], USD per million "
        "tokens, or name the model for the run so that Claude Code holds the limit itself)"
    )


def _watched(stream: ClaudeStream, ctx: RunContext, cli_holds: bool) -> Callable[[bytes], None]:
    """``stream.feed``, plus what must happen while the run goes on: each message's
    usage metered (``ctx.meter``) and the run stopped once it passes its spending
    limit, or at its ``init`` line when that names a model with no price and the CLI
    does not hold the limit itself (``cli_holds``); the CLI's own retries reported
    through ``ctx.on_progress`` (cleared once the model answers); and the run
    stopped at the first retry of a refused key, which the CLI would otherwise
    retry for minutes."""

    def feed(raw: bytes) -> None:
        retry, answered, message, started = stream.last_retry, stream.answered, stream.last_message, stream.started
        stream.feed(raw)
        if stream.started and not started and ctx.meter.limit is not None and not cli_holds:
            problem = _unmetered(stream.model, ctx)
            if problem is not None:
                stream.unmetered = f"refused: {ctx.meter.limit.why} cannot be metered: {problem}"
                raise StopRun
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
