"""Reading ``codex exec --json`` output and classifying how a run ended.

``CodexStream.feed`` takes one stdout line at a time. The final answer is the last
``agent_message`` item; tokens are summed over ``turn.completed`` events. Codex's
``input_tokens`` count every input token (OpenAI's convention), cached reads
(``cached_input_tokens``) and cache writes (``cache_write_input_tokens``) included;
both are moved to their own columns so that ``input`` means the same as for
Claude: tokens neither read from nor written to the cache.

``{"type":"error","message":"Reconnecting... 2/5 (…)"}`` is Codex retrying the API
by itself, not a failure: it is reported as a live progress note and forgotten once
the run goes on. A failure is a ``turn.failed`` or another ``error`` event that no
completed turn follows.

A call to one of Vigil's MCP tools that the tool refused (``refused:``) is kept in
``refusals``; the refusals of shell commands and patches are read from Codex's
session file after the run (``codex_rollout``).

``classify`` (Codex 0.171.0, as seen against a local server):

=========================================================  ==================
what the CLI says                                          outcome
=========================================================  ==================
"You've hit your usage limit … try again at 3:46 PM."      usage_limited
"exceeded retry limit, last status: 429 Too Many Requests"  usage_limited
"You hit your spend cap set … your workspace …",           usage_limited, and
  "Your workspace is out of credits …", "To use Codex      a person's job
  with your ChatGPT plan, upgrade to Plus …", "Quota       (``person_fix``)
  exceeded. Check your plan and billing details."
"unexpected status 401 Unauthorized: …" (or 403)           auth
"Missing environment variable: `OPENAI_API_KEY`."          auth
"stream disconnected before completion: …", 5xx            transient
  ("We're currently experiencing high demand …")
the API's JSON error body (a 400: invalid_request_error)   failed, "the API refused
                                                             the request (…): …"
exit ≠ 0 before any event ("Not inside a trusted           refused
  directory …", "error: unexpected argument …")
exit ≠ 0 after events, no failure named                    transient
no turn completed                                          transient
=========================================================  ==================
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dispatch.agents.codex.usage import codex_tokens
from dispatch.agents.ending import Verdict
from dispatch.agents.pricing import TokenUsage
from dispatch.executors.refusals import channel_refusal, denial_line
from dispatch.executors.resets import reset_ms
from vigil.limit_kinds import ACCOUNT_LIMIT_TEXT
from vigil.models import OutcomeKind

ProgressNote = Callable[[str | None], None]

_RECONNECTING = re.compile(r"^\s*Reconnecting\.*\s*(?:(\d+)/(\d+))?\s*(.*)$", re.IGNORECASE | re.DOTALL)
_USAGE_LIMIT = re.compile(
    r"usage limit|rate limit|quota|\b429\b|too many requests|hit your (?:\w+ )?limit", re.IGNORECASE
)
_AUTH = re.compile(
    r"unauthori[sz]ed|\b401\b|\b403\b|forbidden|api key|missing environment variable|not logged in|"
    r"log ?in|authentication|access token",
    re.IGNORECASE,
)
_TRANSIENT = re.compile(
    r"stream|disconnect|network|timed? ?out|overloaded|\b5\d\d\b|connection|reconnect|temporar|high demand",
    re.IGNORECASE,
)
# stderr lines that are never the reason a run failed
_NOISE = re.compile(
    r"^(?:WARNING\b|Reading prompt from stdin|Stack backtrace|\s*\d+: |\s+at |tip:|Usage:|For more information)",
    re.IGNORECASE,
)
_ERROR_LINE = re.compile(r"^(?:error|Error)\b:?")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NOTE_MAX = 120  # characters of a progress note


def _no_note(note: str | None) -> None:
    pass


def retry_note(message: str) -> str | None:
    """``Reconnecting... 2/5 (stream disconnected …)`` → ``API retry 2/5: stream
    disconnected …``; None when ``message`` is not one of Codex's retry notices."""
    match = _RECONNECTING.match(message)
    if match is None:
        return None
    attempt, limit, rest = match.groups()
    reason = rest.strip().removeprefix("(").removesuffix(")").strip()
    note = f"API retry {attempt}/{limit}" if attempt else "API retry"
    if reason:
        note += f": {reason}"
    return note if len(note) <= NOTE_MAX else note[: NOTE_MAX - 1] + "…"


def stderr_error(stderr: str) -> str | None:
    """The line of Codex's stderr that says why it stopped: the first ``error:``
    line, else the first line that is not a known harmless one (the PATH-alias
    WARNING, "Reading prompt from stdin...", backtrace frames); None if none."""
    lines = [_ANSI.sub("", line).strip() for line in stderr.splitlines()]
    lines = [line for line in lines if line]
    for line in lines:
        if _ERROR_LINE.match(line):
            return line
    for line in lines:
        if not _NOISE.match(line):
            return line
    return None


@dataclass
class CodexStream:
    """What was seen so far in one ``codex exec --json`` stream. ``on_progress``
    gets a note while Codex retries the API, and None once it has moved on."""

    on_progress: ProgressNote = _no_note
    thread_id: str | None = None
    answer: str = ""
    usage: TokenUsage = field(default_factory=TokenUsage)
    turns_completed: int = 0
    failure: str | None = None  # what ended the run badly; None while nothing did
    events: int = 0  # JSON events read: 0 means Codex stopped before it began
    retries: int = 0  # "Reconnecting..." notices seen
    refusals: list[str] = field(default_factory=list)  # Vigil's tools refusing a call, one line each
    _retrying: bool = False

    def feed(self, raw: bytes) -> None:
        try:
            event = json.loads(raw.decode("utf-8", errors="replace"))
        except ValueError:
            return  # noise: not JSON
        if not isinstance(event, dict):
            return
        self.events += 1
        kind = event.get("type")
        if kind == "error":
            self._error(str(event.get("message") or "error"))
            return
        if self._retrying:
            self._retrying = False
            self.on_progress(None)
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self.thread_id = event["thread_id"]
        elif kind == "item.completed":
            self._item(event.get("item"))
        elif kind == "turn.completed":
            self._turn(event.get("usage"))
        elif kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            self.failure = str(message or "turn failed")

    def _error(self, message: str) -> None:
        note = retry_note(message)
        if note is None:
            self.failure = message
            return
        self.retries += 1
        self._retrying = True
        self.on_progress(note)

    def _item(self, item: Any) -> None:
        if not isinstance(item, dict):
            return
        if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
            self.answer = item["text"]
        elif item.get("type") == "mcp_tool_call" and item.get("server") == "vigil" and item.get("status") == "failed":
            refused = channel_refusal(_mcp_text(item))
            if refused is not None:
                given = json.dumps(item.get("arguments"), sort_keys=True)
                self.refusals.append(denial_line(f"vigil.{item.get('tool')}", given, refused))

    def _turn(self, usage: Any) -> None:
        self.turns_completed += 1
        self.failure = None  # a completed turn outlives what went wrong before it
        if not isinstance(usage, dict):
            return
        self.usage += codex_tokens(usage)


def _mcp_text(item: dict[str, Any]) -> str:
    """What a failed MCP tool call said: its error's message, or its result's text."""
    error = item.get("error")
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    result = item.get("result")
    content = result.get("content") if isinstance(result, dict) else None
    return "\n".join(str(c.get("text")) for c in content or () if isinstance(c, dict))


def api_error_text(message: str) -> str:
    """A failure Codex passes on as the API's JSON error body (a 4xx it does not
    know, e.g. a 400: ``{"error": {"type": "invalid_request_error", "message": …}}``,
    with no HTTP status) as one line that says it was the API's refusal; any other
    message as it is."""
    try:
        body = json.loads(message)
    except ValueError:
        return message
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not error.get("message"):
        return message
    kind = error.get("type") or error.get("code") or "error"
    return f"the API refused the request ({kind}): {error['message']}"


def _failure(message: str, now_ms: int) -> Verdict:
    message = api_error_text(message)
    if _USAGE_LIMIT.search(message) or ACCOUNT_LIMIT_TEXT.search(message):
        return Verdict(OutcomeKind.USAGE_LIMITED, f"usage limit: {message}", reset_ms(message, now_ms))
    if _AUTH.search(message):
        return Verdict(OutcomeKind.AUTH, f"authentication failed: {message}")
    if _TRANSIENT.search(message):
        return Verdict(OutcomeKind.TRANSIENT, message)
    return Verdict(OutcomeKind.FAILED, message)


def classify(stream: CodexStream, exit_code: int | None, stderr: str, now_ms: int) -> Verdict:
    """How a finished run ended (the table in this module's docstring). ``now_ms``
    dates a reset named as a clock time."""
    if stream.failure is not None:
        return _failure(stream.failure, now_ms)
    if exit_code != 0:
        line = stderr_error(stderr)
        if line is not None and _AUTH.search(line):
            return Verdict(OutcomeKind.AUTH, f"not logged in (exit code {exit_code}): {line}")
        if stream.events == 0 and exit_code is not None and exit_code > 0:
            # Codex gave up before it began: every task would meet the same refusal
            reason = line or "no reason given on stderr"
            return Verdict(OutcomeKind.REFUSED, f"codex refused to start (exit code {exit_code}): {reason}")
        return Verdict(OutcomeKind.TRANSIENT, f"crashed (exit code {exit_code})" + (f": {line}" if line else ""))
    if stream.turns_completed == 0:
        return Verdict(OutcomeKind.TRANSIENT, "ended without completing a turn")
    return Verdict(OutcomeKind.SUCCESS)
