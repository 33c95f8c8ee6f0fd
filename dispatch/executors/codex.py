"""The ``codex`` executor: OpenAI Codex CLI, ``codex exec --json``.

argv = ``[executors.codex] command`` + ``exec --json`` (+ ``--model M``) +
``extra_args``; the prompt goes on stdin. The final answer is the last
``agent_message`` item. Tokens are summed over ``turn.completed`` events; Codex's
``input_tokens`` include cached ones, which are moved to ``cache_read`` so the
columns mean the same as for Claude. Codex reports no dollar cost, so ``cost_usd``
and ``api_cost_usd`` are both computed from the ``[prices]`` table.

``turn.failed`` and ``error`` events decide failures: usage-limit text →
usage_limited (with the reset time when the text names one); network, overload or
stream trouble → transient; authentication trouble → auth; anything else failed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dispatch.executors import DEFAULT_GRACE_S, RunContext
from dispatch.executors.answer import detail_of, summary_of
from dispatch.executors.child import ended_early
from dispatch.executors.resets import reset_ms
from dispatch.executors.transcript import run_agent_cli
from dispatch.pricing import TokenUsage, api_cost_usd
from vigil.clock import SystemClock
from vigil.config import AgentCliSettings, Settings
from vigil.models import Outcome, OutcomeKind, Task

_USAGE_LIMIT = re.compile(r"usage limit|rate limit|quota", re.IGNORECASE)
_AUTH = re.compile(r"unauthori[sz]ed|\b401\b|\b403\b|api key|log ?in|authentication", re.IGNORECASE)
_TRANSIENT = re.compile(
    r"stream|disconnect|network|timed? ?out|overloaded|\b5\d\d\b|connection|reconnect|temporar", re.IGNORECASE
)


def codex_argv(cli: AgentCliSettings, model: str | None) -> list[str]:
    """The full argv for one run (the prompt is not in it)."""
    argv = [*cli.command, "exec", "--json"]
    if model:
        argv += ["--model", model]
    return argv + list(cli.extra_args)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass
class CodexStream:
    """What was seen so far in one ``codex exec --json`` stream."""

    thread_id: str | None = None
    answer: str = ""
    usage: TokenUsage = field(default_factory=TokenUsage)
    turns_completed: int = 0
    errors: list[str] = field(default_factory=list)
    noise_lines: int = 0

    def feed(self, raw: bytes) -> None:
        try:
            event = json.loads(raw.decode("utf-8", errors="replace"))
        except ValueError:
            self.noise_lines += 1
            return
        if not isinstance(event, dict):
            self.noise_lines += 1
            return
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self.thread_id = event["thread_id"]
        elif kind == "item.completed":
            self._item(event.get("item"))
        elif kind == "turn.completed":
            self._turn(event.get("usage"))
        elif kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            self.errors.append(str(message or "turn failed"))
        elif kind == "error":
            self.errors.append(str(event.get("message") or "error"))

    def _item(self, item: Any) -> None:
        if isinstance(item, dict) and item.get("type") == "agent_message" and isinstance(item.get("text"), str):
            self.answer = item["text"]

    def _turn(self, usage: Any) -> None:
        self.turns_completed += 1
        if not isinstance(usage, dict):
            return
        cached = _count(usage.get("cached_input_tokens"))
        self.usage += TokenUsage(
            input=max(_count(usage.get("input_tokens")) - cached, 0),
            output=_count(usage.get("output_tokens")),
            cache_read=cached,
        )


def classify(stream: CodexStream, exit_code: int | None, stderr: str) -> tuple[OutcomeKind, str | None]:
    """The outcome class and error text of a finished run."""
    if stream.errors:
        message = stream.errors[-1]
        if _USAGE_LIMIT.search(message):
            return OutcomeKind.USAGE_LIMITED, f"usage limit: {message}"
        if _AUTH.search(message):
            return OutcomeKind.AUTH, f"authentication failed: {message}"
        if _TRANSIENT.search(message):
            return OutcomeKind.TRANSIENT, message
        return OutcomeKind.FAILED, message
    if exit_code != 0:
        tail = " ".join(stderr.strip().splitlines()[-3:])
        if _AUTH.search(stderr):
            return OutcomeKind.AUTH, f"not logged in (exit code {exit_code}): {tail}"
        return OutcomeKind.TRANSIENT, f"crashed (exit code {exit_code})" + (f": {tail}" if tail else "")
    if stream.turns_completed == 0:
        return OutcomeKind.TRANSIENT, "ended without completing a turn"
    return OutcomeKind.SUCCESS, None


class CodexExecutor:
    name = "codex"

    def __init__(
        self,
        settings: Settings,
        *,
        grace_s: float = DEFAULT_GRACE_S,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self.settings = settings
        self.grace_s = grace_s
        # only to read a reset time given as a clock time: the next such moment after now
        self.now_ms = now_ms or SystemClock().now_ms

    async def run(self, task: Task, ctx: RunContext) -> Outcome:
        model = ctx.model or self.settings.codex.model
        argv = codex_argv(self.settings.codex, model)
        stream = CodexStream()
        result = await run_agent_cli(self.name, argv, ctx, self.grace_s, stream.feed)

        transcript_path = str(ctx.transcript_path)
        early = ended_early(result, ctx.timeout_s, transcript_path)
        retry_at = None
        if early is not None:
            kind, error, summary = early.kind, early.error, early.summary
        else:
            kind, error = classify(stream, result.exit_code, result.stderr)
            summary = summary_of(stream.answer if kind is OutcomeKind.SUCCESS else (error or stream.answer))
            if kind is OutcomeKind.USAGE_LIMITED and error:
                retry_at = reset_ms(error, self.now_ms())
        cost = api_cost_usd(self.settings.prices, model, stream.usage)
        return Outcome(
            kind=kind,
            summary=summary,
            detail=detail_of(stream.answer),
            error=error,
            exit_code=result.exit_code,
            cost_usd=cost,
            api_cost_usd=cost,
            tokens_in=stream.usage.input,
            tokens_out=stream.usage.output,
            cache_read_tokens=stream.usage.cache_read,
            cache_write_tokens=0,
            model=model,
            session_id=stream.thread_id,
            transcript_path=transcript_path,
            retry_at=retry_at,
        )
