"""``vigil doctor --probe`` through Claude Code (``dispatch.agents.probe``):
``--print --verbose --output-format stream-json --tools "" --strict-mcp-config
--no-session-persistence --max-turns 1``: no tools offered, no MCP server, nothing
kept. Its request holds the CLI's system prompt, about 2,000 input tokens (Claude
Code 2.1.197), and the answer a few output tokens. The last ``rate_limit_event``
says the account's limit state.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from dispatch.agents.claude.stream import ClaudeStream
from dispatch.agents.claude.stream import classify as classify_claude
from dispatch.agents.probe import Seen, Target, asked, verdict
from dispatch.executors.child import StopRun
from vigil.clock import iso_utc
from vigil.config import Settings
from vigil.doctor import Finding

FLAGS = ("--print", "--verbose", "--output-format", "stream-json", "--tools", "")
QUIET = ("--strict-mcp-config", "--no-session-persistence", "--max-turns", "1")
INPUT_TOKENS = "2,000"  # about, per request (the docstring)


async def probe(settings: Settings, target: Target) -> Finding:
    """One probe request through Claude Code, for ``target``'s account."""
    cli = settings.claude
    argv = [*cli.command, *FLAGS, *QUIET]
    if cli.model:
        argv += ["--model", cli.model]
    argv += list(cli.extra_args)
    stream, seen = ClaudeStream(), Seen()

    def watch(line: dict[str, Any]) -> None:
        info = line.get("rate_limit_info")
        if line.get("type") == "rate_limit_event" and isinstance(info, dict):
            seen.limit = limit_text(info) if info else None
        if line.get("type") == "system" and line.get("subtype") == "api_retry":
            status, error = line.get("error_status"), line.get("error") or "?"
            seen.retry = f"HTTP {status} {error}" if status is not None else f"no HTTP answer: {error}"
            raise StopRun

    result = await asked(argv, target.env, stream.feed, watch, seen)
    if isinstance(result, Finding):
        return result
    outcome = classify_claude(stream, result.exit_code, result.stderr, int(time.time() * 1000))
    result_line = stream.result or {}
    cost = result_line.get("total_cost_usd")
    usage = stream.usage_by_model()
    tokens = sum(u.input + u.output + u.cache_read + u.cache_write for u in usage.values())
    spent = f"${cost:.4f}" if isinstance(cost, int | float) else "cost not reported"
    model = re.sub(r"\[\w+\]$", "", next(iter(usage), None) or stream.model or "?")  # a "[1m]" tag is no name
    answered = f"(model {model}, {tokens} tokens, {spent}); {seen.limit or limit_text(None)}"
    return verdict(outcome.kind, outcome.error, outcome.retry_at, answered, seen.limit or "")


def limit_text(info: Mapping[str, Any] | None) -> str:
    """Claude Code's last ``rate_limit_info``, for people: ``allowed (five_hour,
    resets …, 42% used)``."""
    if info is None:
        return "no limit state reported"
    parts = [str(info[key]) for key in ("rateLimitType", "overageStatus") if isinstance(info.get(key), str)]
    resets = info.get("resetsAt")
    if isinstance(resets, int | float) and not isinstance(resets, bool) and resets > 0:
        parts.append(f"resets {iso_utc(int(resets * 1000))}")
    used = info.get("utilization")
    if isinstance(used, int | float) and not isinstance(used, bool):
        parts.append(f"{used * 100 if used <= 1 else used:.0f}% used")
    return f"limit {info.get('status', '?')}" + (f" ({', '.join(parts)})" if parts else "")
