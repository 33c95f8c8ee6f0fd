"""``vigil doctor --probe`` through Codex (``dispatch.agents.probe``): ``exec --json
--skip-git-repo-check --sandbox read-only``. Its request holds Codex's instructions
and tools, about 10,000 input tokens (Codex 0.171.0), most of them cached on a
second probe. The session is kept (``--ephemeral`` would drop it): its file is
where Codex writes the limit state the API's headers gave it
(``dispatch.agents.codex.usage.last_rate_limits``), so the probe's session stays in
Codex's history.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from dispatch.agents.codex.executor import configured_model
from dispatch.agents.codex.rollout import rollout_path
from dispatch.agents.codex.stream import CodexStream, retry_note
from dispatch.agents.codex.stream import classify as classify_codex
from dispatch.agents.codex.usage import last_rate_limits
from dispatch.agents.pricing import api_cost_usd
from dispatch.agents.probe import Seen, Target, asked, verdict
from dispatch.executors.child import StopRun
from vigil.clock import iso_utc
from vigil.config import Settings
from vigil.doctor import Finding
from vigil.durations import format_duration

FLAGS = ("exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only")
INPUT_TOKENS = "10,000"  # about, per request (the docstring)
_RECONNECTING = re.compile(r"^\s*Reconnecting\.*\s*(?:\d+/\d+)?", re.IGNORECASE)  # Codex's retry notice


def _unwrapped(notice: str) -> str:
    """Codex's retry notice without its wrapping: ``Reconnecting... 1/5 (why)`` → ``why``."""
    text = _RECONNECTING.sub("", notice).strip()
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


async def probe(settings: Settings, target: Target) -> Finding:
    """One probe request through Codex, for ``target``'s account."""
    cli = settings.codex
    argv = [*cli.command, *FLAGS]
    if cli.model:
        argv += ["--model", cli.model]
    argv += [*cli.extra_args, "-"]
    stream, seen = CodexStream(), Seen()

    def watch(line: dict[str, Any]) -> None:
        if line.get("type") == "error" and retry_note(str(line.get("message"))):
            seen.retry = _unwrapped(str(line.get("message")))
            raise StopRun

    result = await asked(argv, target.env, stream.feed, watch, seen)
    if isinstance(result, Finding):
        return result
    outcome = classify_codex(stream, result.exit_code, result.stderr, int(time.time() * 1000))
    model = cli.model or configured_model(target.env)
    usage = stream.usage
    tokens = usage.input + usage.output + usage.cache_read + usage.cache_write
    cost = api_cost_usd(settings.prices, model, usage)
    limit = limit_text(target.env, stream.thread_id)
    answered = f"(model {model or '?'}, {tokens} tokens, ${cost:.4f} at the price table); {limit}"
    return verdict(outcome.kind, outcome.error, outcome.retry_at, answered, limit)


def limit_text(env: Mapping[str, str], thread_id: str | None) -> str:
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
