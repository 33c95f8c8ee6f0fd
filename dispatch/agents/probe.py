"""``vigil doctor --probe``: one minimal live request per account through the real
agent CLI, reporting login, reachability and the account's limit state.

``vigil doctor`` alone makes no call to a model: it cannot tell a dead base URL or
a revoked key from a working one. ``--probe`` (opt-in: it costs a request) runs
the CLI once per account of the configured executor and of its fallbacks, as the
loop would (the account's environment, ``[executors.*] command`` and
``extra_args``, the configured model), with the prompt ``PROMPT`` in an empty
temporary folder and nothing else it does not need:

- Claude Code: ``--print --verbose --output-format stream-json --tools ""
  --strict-mcp-config --no-session-persistence --max-turns 1``: no tools offered, no
  MCP server, nothing kept. Its request holds the CLI's system prompt, about 2,000
  input tokens (Claude Code 2.1.197), and the answer a few output tokens;
- Codex: ``exec --json --skip-git-repo-check --sandbox read-only``: its request
  holds Codex's instructions and tools, about 10,000 input tokens (Codex 0.171.0),
  most of them cached on a second probe. The session is kept (``--ephemeral``
  would drop it): its file is where Codex writes the limit state the API's
  headers gave it (``codex_usage.last_rate_limits``), so the probe's session
  stays in Codex's history.

What each probe says (one line per account, ``probe`` in the report):

====================================================  ======  ===================
the CLI …                                             level   says
====================================================  ======  ===================
answers                                               ok      tokens, cost, and the
                                                              limit state the CLI
                                                              reported (Claude
                                                              Code's rate-limit
                                                              event: status, window,
                                                              reset, utilisation)
is limited (429, a usage limit, ``rejected``)          warn    until when, if said
meets an overloaded API (5xx, 529)                     warn    reachable but busy
is refused (401, 403, not logged in)                  FAIL    the key or login
cannot reach the API (no connection, no answer        FAIL    unreachable
  within ``TIMEOUT_S``)
fails otherwise (cannot start, refuses its options,   FAIL    the outcome and the
  another HTTP error)                                          CLI's error
====================================================  ======  ===================

A CLI that would retry a failed request by itself (Claude Code retries a refused
key or a dead URL for minutes) is stopped at its first retry: one request is the
probe.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dispatch.accounts import account_env
from dispatch.agents.claude.stream import ClaudeStream
from dispatch.agents.claude.stream import classify as classify_claude
from dispatch.agents.codex.executor import configured_model
from dispatch.agents.codex.rollout import rollout_path
from dispatch.agents.codex.stream import CodexStream, retry_note
from dispatch.agents.codex.stream import classify as classify_codex
from dispatch.agents.codex.usage import last_rate_limits
from dispatch.agents.pricing import api_cost_usd
from dispatch.environment import base_env
from dispatch.executors.child import ChildResult, StopRun, run_child
from vigil.accounts import DEFAULT_ACCOUNT
from vigil.clock import iso_utc
from vigil.config import AGENT_EXECUTORS, Settings
from vigil.doctor import Finding
from vigil.durations import format_duration
from vigil.models import OutcomeKind

PROMPT = "Reply with the single word OK."
TIMEOUT_S = 90.0
GRACE_S = 3.0
CLAUDE_FLAGS = ("--print", "--verbose", "--output-format", "stream-json", "--tools", "")
CLAUDE_QUIET = ("--strict-mcp-config", "--no-session-persistence", "--max-turns", "1")
CODEX_FLAGS = ("exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only")
INPUT_TOKENS = {"claude": "2,000", "codex": "10,000"}  # about, per request (module docstring)

_REFUSED = re.compile(
    r"\b40[13]\b|unauthori[sz]ed|forbidden|invalid api key|authentication|not logged in|/login|api key",
    re.IGNORECASE,
)
_LIMITED = re.compile(r"\b429\b|usage limit|rate.?limit|hit your (?:\w+ )?limit|quota|too many requests", re.IGNORECASE)
_RECONNECTING = re.compile(r"^\s*Reconnecting\.*\s*(?:\d+/\d+)?", re.IGNORECASE)  # Codex's retry notice
_BUSY = re.compile(r"\b5\d\d\b|overloaded|high demand|internal server error", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Target:
    """One account to probe: ``executor``'s ``account`` with the environment that selects it."""

    executor: str
    account: str
    env: Mapping[str, str]

    @property
    def name(self) -> str:
        return f"{self.executor}:{self.account}"


def targets(settings: Settings, source: Mapping[str, str] | None = None) -> list[Target]:
    """Every account of the configured executor and of its fallbacks that is an
    agent CLI, in order; ``source`` is the environment the loop starts from (None:
    this process's)."""
    origin = os.environ if source is None else source
    found = []
    for executor in dict.fromkeys((settings.dispatch.executor, *settings.dispatch.fallback)):
        if executor not in AGENT_EXECUTORS:
            continue
        env = base_env(settings, source=origin, executor=executor)
        accounts = (settings.claude if executor == "claude" else settings.codex).accounts
        if not accounts:
            found.append(Target(executor, DEFAULT_ACCOUNT, env))
        for account in accounts:
            found.append(Target(executor, account.name, account_env(env, executor, account, origin)))
    return found


def cost_note(settings: Settings, source: Mapping[str, str] | None = None) -> str:
    """What ``--probe`` is about to spend, said before it runs."""
    found = targets(settings, source)
    if not found:
        return f"probe: the executor {settings.dispatch.executor!r} has no agent CLI to probe"
    sizes = ", ".join(f"~{INPUT_TOKENS[e]} input tokens with {e}" for e in dict.fromkeys(t.executor for t in found))
    names = ", ".join(t.name for t in found)
    return (
        f"probe: one live request per account ({len(found)}: {names}), each {sizes} and a few output "
        "tokens, billed to the account (or counted against its subscription)"
    )


@dataclass
class _Seen:
    """What the probe's stream said beyond the executor's parser: the first retry
    the CLI began (the probe stops there) and Claude Code's last rate-limit event."""

    retry: str | None = None
    limit: dict[str, Any] | None = None


async def probe_findings(settings: Settings, source: Mapping[str, str] | None = None) -> list[Finding]:
    """One line per account (see the module docstring)."""
    found = []
    for target in targets(settings, source):
        started = time.monotonic()
        finding = await (_probe_claude if target.executor == "claude" else _probe_codex)(settings, target)
        took = f"answered in {time.monotonic() - started:.1f}s " if finding.level == "ok" else ""
        found.append(Finding(finding.level, "probe", f"{target.name}: {took}{finding.detail}"))
    return found


async def _run(argv: list[str], env: Mapping[str, str], feed: Callable[[bytes], None]) -> ChildResult:
    async def started(pid: int, pgid: int, proc_start: str | None) -> None:
        return None

    with tempfile.TemporaryDirectory(prefix="vigil-probe-") as folder:
        return await run_child(
            argv,
            env=env,
            cwd=Path(folder),
            stdin=PROMPT.encode(),
            timeout_s=TIMEOUT_S,
            grace_s=GRACE_S,
            on_start=started,
            on_line=feed,
        )


def _problem(result: ChildResult) -> Finding | None:
    """A probe that never got to ask: the CLI could not start, or no answer came."""
    if result.spawn_error is not None:
        return Finding("fail", "probe", f"the CLI does not start: {result.spawn_error}")
    if result.timed_out:
        return Finding("fail", "probe", f"unreachable: no answer within {TIMEOUT_S:g}s")
    return None


def _retried(message: str) -> Finding:
    """The verdict on the first request, from the CLI's first retry of it."""
    if _REFUSED.search(message):
        return Finding("fail", "probe", f"refused: {message}: check the account's key or login")
    if _LIMITED.search(message):
        return Finding("warn", "probe", f"limited: {message}")
    if _BUSY.search(message):
        return Finding("warn", "probe", f"reachable, but the API is busy: {message}")
    return Finding("fail", "probe", f"unreachable: {message}: check the CLI's base URL and the network")


def _verdict(kind: OutcomeKind, error: str | None, retry_at: int | None, answered: str, limit: str = "") -> Finding:
    """The probe's line from the executor's own verdict on the run; ``limit`` is
    the limit state the CLI reported (empty: none)."""
    if kind is OutcomeKind.SUCCESS:
        return Finding("ok", "probe", answered)
    if kind is OutcomeKind.USAGE_LIMITED:
        until = f" until {iso_utc(retry_at)}" if retry_at is not None else ""
        return Finding("warn", "probe", f"limited{until}: {error}" + (f"; {limit}" if limit else ""))
    if kind is OutcomeKind.AUTH:
        return Finding("fail", "probe", f"refused: {error}: check the account's key or login")
    if kind is OutcomeKind.TRANSIENT:  # the API's trouble or the way to it
        return _retried(error or str(kind))
    return Finding("fail", "probe", f"{kind}: {error}")  # the CLI refused to start, the API the request …


def _limit_text(info: Mapping[str, Any] | None) -> str:
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


async def _probe_claude(settings: Settings, target: Target) -> Finding:
    cli = settings.claude
    argv = [*cli.command, *CLAUDE_FLAGS, *CLAUDE_QUIET]
    if cli.model:
        argv += ["--model", cli.model]
    argv += list(cli.extra_args)
    stream, seen = ClaudeStream(), _Seen()

    def feed(raw: bytes) -> None:
        stream.feed(raw)
        try:
            line = json.loads(raw)
        except ValueError:
            return
        if not isinstance(line, dict):
            return
        if line.get("type") == "rate_limit_event" and isinstance(line.get("rate_limit_info"), dict):
            seen.limit = line["rate_limit_info"]
        if line.get("type") == "system" and line.get("subtype") == "api_retry":
            status, error = line.get("error_status"), line.get("error") or "?"
            seen.retry = f"HTTP {status} {error}" if status is not None else f"no HTTP answer: {error}"
            raise StopRun

    result = await _run(argv, target.env, feed)
    problem = _problem(result)
    if problem is not None:
        return problem
    limit = _limit_text(seen.limit)
    if seen.retry is not None:
        found = _retried(f"the first request failed ({seen.retry})")
        return Finding(found.level, found.what, f"{found.detail}; {limit}") if seen.limit else found
    verdict = classify_claude(stream, result.exit_code, result.stderr, int(time.time() * 1000))
    result_line = stream.result or {}
    cost = result_line.get("total_cost_usd")
    usage = stream.usage_by_model()
    tokens = sum(u.input + u.output + u.cache_read + u.cache_write for u in usage.values())
    spent = f"${cost:.4f}" if isinstance(cost, int | float) else "cost not reported"
    model = re.sub(r"\[\w+\]$", "", next(iter(usage), None) or stream.model or "?")  # a "[1m]" tag is no name
    answered = f"(model {model}, {tokens} tokens, {spent}); {limit}"
    return _verdict(verdict.kind, verdict.error, verdict.retry_at, answered, limit if seen.limit else "")


def _unwrapped(notice: str) -> str:
    """Codex's retry notice without its wrapping: ``Reconnecting... 1/5 (why)`` → ``why``."""
    text = _RECONNECTING.sub("", notice).strip()
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


async def _probe_codex(settings: Settings, target: Target) -> Finding:
    cli = settings.codex
    argv = [*cli.command, *CODEX_FLAGS]
    if cli.model:
        argv += ["--model", cli.model]
    argv += [*cli.extra_args, "-"]
    stream, seen = CodexStream(), _Seen()

    def feed(raw: bytes) -> None:
        stream.feed(raw)
        try:
            line = json.loads(raw)
        except ValueError:
            return
        if isinstance(line, dict) and line.get("type") == "error" and retry_note(str(line.get("message"))):
            seen.retry = str(line.get("message"))
            raise StopRun

    result = await _run(argv, target.env, feed)
    problem = _problem(result)
    if problem is not None:
        return problem
    if seen.retry is not None:
        return _retried(f"the first request failed ({_unwrapped(seen.retry)})")
    verdict = classify_codex(stream, result.exit_code, result.stderr, int(time.time() * 1000))
    model = cli.model or configured_model(target.env)
    usage = stream.usage
    tokens = usage.input + usage.output + usage.cache_read + usage.cache_write
    cost = api_cost_usd(settings.prices, model, usage)
    limit = _codex_limit_text(target.env, stream.thread_id)
    answered = f"(model {model or '?'}, {tokens} tokens, ${cost:.4f} at the price table); {limit}"
    return _verdict(verdict.kind, verdict.error, verdict.retry_at, answered, limit)


def _codex_limit_text(env: Mapping[str, str], thread_id: str | None) -> str:
    """What Codex's session file says of the account's windows, for people:
    ``limit: 5h00m window 42% used (resets …), 7d00h window 7% used``."""
    path = None if thread_id is None else rollout_path(env, thread_id)
    try:
        limits = None if path is None else last_rate_limits(path)
    except OSError:
        limits = None
    windows = []
    for key in ("primary", "secondary"):
        window = limits.get(key) if limits is not None else None
        if not isinstance(window, dict) or not isinstance(window.get("used_percent"), int | float):
            continue
        minutes, resets = window.get("window_minutes"), window.get("resets_at")
        text = f"{window['used_percent']:.0f}% used"
        if isinstance(minutes, int) and minutes > 0:
            text = f"{format_duration(minutes * 60_000)} window {text}"
        if isinstance(resets, int) and resets > 0:
            text += f" (resets {iso_utc(resets * 1000)})"
        windows.append(text)
    reached = limits.get("rate_limit_reached_type") if limits is not None else None
    if isinstance(reached, str):
        windows.append(f"reached: {reached}")
    return "limit: " + ", ".join(windows) if windows else "no limit state reported"
