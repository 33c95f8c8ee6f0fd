"""Reading Claude Code's ``stream-json`` output and classifying how a run ended.

``ClaudeStream.feed`` takes one stdout line at a time and keeps only what the
outcome needs; lines that are not JSON, not objects, or of unknown types are
counted and skipped (some versions print a banner first). ``classify`` applies the
ordered table of the reference on agent CLI output: crashed → usage limited →
transient → auth → another 4xx (failed, with its status) → budget / turns →
context → success, and anything else failed. A success in which a Bash call
failed because the OS sandbox could not start it (``refusals.sandbox_start_failure``)
is ``sandbox_failed`` instead: the agent's commands never ran.

What Claude Code 2.1.197 prints for a 429: with a subscription, a
``rate_limit_event`` ``rejected`` with ``resetsAt`` (the reset the response's
headers named) and ``You've hit your session limit · resets 2:29am (UTC)``; with
an API key, no reset at all: ``api_retry`` lines whose ``retry_delay_ms`` is the
response's ``retry-after`` (with ``retry-after: 100`` it gave up at once, without
a retry line), then ``API Error: Request rejected (429) · …``. Every
``rate_limit_event`` (allowed ones too) is kept as a ``LimitReport``
(``limit_reports``: its kind, reset, use; ``vigil.limit_kinds``).

Two cases come before that table. A refused key is known from the CLI's first
``api_retry`` line that names 401/403 or ``authentication_failed`` (the CLI would
retry it for minutes): the executor stops the run there (``auth_retry``). And a CLI
that exits non-zero before its ``init`` line (an option it does not know, a mode it
refuses as root) refused to start: ``refused``, since every task would fail alike.

What the agent was refused is an outcome of its own, never a reason to stop the
loop: the result's ``permission_denials`` (the CLI's permission rules), and from the
tool results as they stream by, Vigil's tools refusing a call, a call to a Vigil tool
that does not exist, and Bash commands the OS sandbox stopped
(``dispatch.executors.refusals``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from dispatch.agents.ending import Verdict
from dispatch.agents.pricing import TokenUsage
from dispatch.executors.answer import error_line
from dispatch.executors.refusals import (
    VIGIL_TOOL_PREFIX,
    channel_refusal,
    denial_line,
    sandbox_failed_error,
    sandbox_refusal,
    sandbox_start_failure,
    unknown_vigil_tool,
)
from dispatch.executors.resets import reset_ms
from vigil.limit_kinds import ACCOUNT_LIMIT_TEXT, WINDOW_MS, LimitReport
from vigil.models import OutcomeKind

MS_PER_S = 1000
# "hit your session limit", "… weekly limit", "… monthly spend limit", "out of usage credits" …
_USAGE_LIMIT_TEXT = ACCOUNT_LIMIT_TEXT
_AUTH_TEXT = re.compile(
    r"invalid api key|please run /login|not logged in|oauth token has expired|authentication|unauthori[sz]ed",
    re.IGNORECASE,
)
_OVERLOAD_TEXT = re.compile(r"overloaded|\b529\b|internal server error|\b5\d\d\b", re.IGNORECASE)
_CONTEXT_TEXT = re.compile(r"prompt is too long|context window|context length", re.IGNORECASE)
_API_ERROR_TEXT = re.compile(r"^API Error:", re.IGNORECASE)  # network trouble, a broken stream …
USAGE_TEXT_MAX = 500  # a usage-limit notice is short; a long answer merely mentioning one is not it


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else 0.0


@dataclass
class ClaudeStream:
    """What was seen so far in one run's stream."""

    session_id: str | None = None
    model: str | None = None
    result: dict[str, Any] | None = None
    last_text: str = ""  # the last assistant text block, in case no result line comes
    last_retry: dict[str, Any] | None = None
    rejected_reset_ms: int | None = None
    rate_limit_rejected: bool = False
    limit_reports: list[LimitReport] = field(default_factory=list)  # every rate_limit_event, in order
    auth_retry: dict[str, Any] | None = None  # the first api_retry that says the key is refused
    started: bool = False  # the init line came
    answered: int = 0  # assistant lines so far
    unknown_types: set[str] = field(default_factory=set)
    tool_calls: dict[str, tuple[str, Any]] = field(default_factory=dict)  # tool_use id → (name, input)
    refusals: list[str] = field(default_factory=list)  # seen in tool results, one line each
    # Bash calls the OS sandbox could not start (bubblewrap failed), one line each
    sandbox_failures: list[str] = field(default_factory=list)
    # the usage of the message the last assistant line belonged to: (message id, model,
    # tokens as of the message's start; a message of several blocks repeats it)
    last_message: tuple[str, str | None, TokenUsage] | None = None
    unmetered: str | None = None  # why the run was ended at its start: its cap could not be metered

    def feed(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            return
        try:
            line = json.loads(text)
        except ValueError:
            return  # noise: not JSON
        if not isinstance(line, dict):
            return
        kind = line.get("type")
        if isinstance(line.get("session_id"), str):
            self.session_id = line["session_id"]
        if kind == "system":
            self._system(line)
        elif kind == "assistant":
            self.answered += 1
            self._assistant(line)
        elif kind == "rate_limit_event":
            self._rate_limit(line)
        elif kind == "result":
            self.result = line
        elif kind == "user":
            self._user(line)
        else:
            self.unknown_types.add(str(kind))

    def _system(self, line: dict[str, Any]) -> None:
        if line.get("subtype") == "init":
            self.started = True
            if isinstance(line.get("model"), str):
                self.model = line["model"]
        elif line.get("subtype") == "api_retry":
            self.last_retry = line
            if self.auth_retry is None and (
                line.get("error_status") in (401, 403) or line.get("error") == "authentication_failed"
            ):
                self.auth_retry = line

    def _assistant(self, line: dict[str, Any]) -> None:
        message = line.get("message")
        if not isinstance(message, dict):
            return
        usage = message.get("usage")
        if isinstance(usage, dict) and isinstance(message.get("id"), str):
            model = message.get("model")
            self.last_message = (message["id"], model if isinstance(model, str) else self.model, _tokens(usage))
        content = message.get("content")
        blocks = [block for block in content or () if isinstance(block, dict)]
        texts = [b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)]
        if texts:
            self.last_text = "\n".join(texts)
        for block in blocks:
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                self.tool_calls[block["id"]] = (str(block.get("name") or "?"), block.get("input"))

    def _user(self, line: dict[str, Any]) -> None:
        """Tool results: a refusal among them is kept (``refusals``)."""
        message = line.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                failure = self._sandbox_failure(block)
                if failure is not None:
                    self.sandbox_failures.append(failure)
                    continue
                refusal = self._refusal(block)
                if refusal is not None:
                    self.refusals.append(refusal)

    def _sandbox_failure(self, result: dict[str, Any]) -> str | None:
        """A failed Bash call whose sandbox did not start, as one line; else None."""
        name, given = self.tool_calls.get(str(result.get("tool_use_id")), ("?", None))
        if name != "Bash" or not result.get("is_error"):
            return None
        failure = sandbox_start_failure(_result_text(result.get("content")))
        command = given.get("command") if isinstance(given, dict) else None
        return None if failure is None else denial_line("Bash", str(command), failure)

    def _refusal(self, result: dict[str, Any]) -> str | None:
        name, given = self.tool_calls.get(str(result.get("tool_use_id")), ("?", None))
        text = _result_text(result.get("content"))
        missing = unknown_vigil_tool(text) if result.get("is_error") else None
        if missing is not None:
            return denial_line(missing, "", "no such tool")
        if name.startswith(VIGIL_TOOL_PREFIX):
            refused = channel_refusal(text) if result.get("is_error") else None
            shown = "vigil." + name.removeprefix(VIGIL_TOOL_PREFIX)
            return None if refused is None else denial_line(shown, json.dumps(given, sort_keys=True), refused)
        if name == "Bash":
            blocked = sandbox_refusal(text)
            command = given.get("command") if isinstance(given, dict) else None
            return None if blocked is None else denial_line("Bash", str(command), f"blocked: {blocked}")
        return None

    def _rate_limit(self, line: dict[str, Any]) -> None:
        info = line.get("rate_limit_info")
        if not isinstance(info, dict):
            return
        report = limit_report(info)
        if report is not None:
            self.limit_reports.append(report)
        if info.get("status") not in ("rejected", "exceeded"):
            return  # "allowed" and "allowed_warning" are informational
        self.rate_limit_rejected = True
        if report is not None and report.resets_at is not None:
            self.rejected_reset_ms = report.resets_at

    # -- what the result says ------------------------------------------------------

    @property
    def answer(self) -> str:
        """The final answer: the result's text, else (no result line, or an empty
        result as after ``error_max_turns``) the last assistant text."""
        text = self.result.get("result") if self.result is not None else None
        if isinstance(text, str) and text.strip():
            return text
        return self.last_text

    @property
    def permission_denials(self) -> tuple[str, ...]:
        """What the agent was refused, one line each: the result's
        ``permission_denials`` (``Tool: input``, a Bash call's command, else its
        input as JSON), then the refusals seen in tool results."""
        denials = self.result.get("permission_denials") if self.result else None
        lines = []
        for denial in denials if isinstance(denials, list) else ():
            if not isinstance(denial, dict):
                continue
            tool = str(denial.get("tool_name") or "?")
            given = denial.get("tool_input")
            command = given.get("command") if isinstance(given, dict) else None
            shown = command if isinstance(command, str) else json.dumps(given, sort_keys=True)
            lines.append(f"{tool}: {shown}")
        return (*lines, *self.refusals)

    @property
    def cost_usd(self) -> float:
        return _number(self.result.get("total_cost_usd")) if self.result else 0.0

    def usage_by_model(self) -> dict[str, TokenUsage]:
        """Tokens per model from ``modelUsage`` (sub-agents and helper models
        included); from ``usage`` of the main model when ``modelUsage`` is absent."""
        if self.result is None:
            return {}
        per_model = self.result.get("modelUsage")
        if isinstance(per_model, dict) and per_model:
            return {
                str(name): TokenUsage(
                    input=_int(u.get("inputTokens")),
                    output=_int(u.get("outputTokens")),
                    cache_read=_int(u.get("cacheReadInputTokens")),
                    cache_write=_int(u.get("cacheCreationInputTokens")),
                )
                for name, u in per_model.items()
                if isinstance(u, dict)
            }
        usage = self.result.get("usage")
        if not isinstance(usage, dict):
            return {}
        return {self.model or "unknown": _tokens(usage)}


def _epoch_ms(value: object) -> int | None:
    """Epoch seconds (as the CLI gives them) → ms; None when not a positive number."""
    return (
        int(value * MS_PER_S) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None
    )


def limit_report(info: dict[str, Any]) -> LimitReport | None:
    """A ``rate_limit_event``'s ``rate_limit_info`` as a ``LimitReport`` (``exceeded``,
    an older name, read as ``rejected``); None without a status."""
    status = info.get("status")
    if not isinstance(status, str):
        return None
    kind = info.get("rateLimitType")
    kind = kind if isinstance(kind, str) else ""
    used = info.get("utilization")
    over, why = info.get("overageStatus"), info.get("overageDisabledReason")
    return LimitReport(
        status="rejected" if status == "exceeded" else status,
        kind=kind,
        resets_at=_epoch_ms(info.get("resetsAt"))
        or (_epoch_ms(info.get("overageResetsAt")) if kind == "overage" else None),
        utilization=float(used) if isinstance(used, int | float) and not isinstance(used, bool) else None,
        window_ms=WINDOW_MS.get(kind),
        overage_status=over if isinstance(over, str) else None,
        overage_reason=why if isinstance(why, str) else None,
    )


def _tokens(usage: dict[str, Any]) -> TokenUsage:
    """An API ``usage`` object (``input_tokens`` …) as token counts."""
    return TokenUsage(
        input=_int(usage.get("input_tokens")),
        output=_int(usage.get("output_tokens")),
        cache_read=_int(usage.get("cache_read_input_tokens")),
        cache_write=_int(usage.get("cache_creation_input_tokens")),
    )


def _errors_text(result: dict[str, Any]) -> str:
    errors = result.get("errors")
    if isinstance(errors, list):
        return "; ".join(str(e) for e in errors)
    return ""


def classify(stream: ClaudeStream, exit_code: int | None, stderr: str, now_ms: int) -> Verdict:
    """The outcome class of a finished run (the reference's ordered table)."""
    result = stream.result
    if result is None:
        return _without_result(stream, exit_code, stderr)

    subtype = result.get("subtype")
    # a result without is_error is judged by its subtype alone
    is_error = bool(result.get("is_error", subtype != "success"))
    status = result.get("api_error_status")
    terminal = result.get("terminal_reason")
    text = stream.answer
    short = text if len(text) <= USAGE_TEXT_MAX else ""
    retry_error = stream.last_retry.get("error") if stream.last_retry else None
    message = (short or _errors_text(result) or f"{subtype}").strip()

    usage_text = bool(_USAGE_LIMIT_TEXT.search(short)) and (is_error or "|" in short)
    if stream.rate_limit_rejected or (is_error and status == 429) or usage_text:
        retry_at = stream.rejected_reset_ms or reset_ms(short, now_ms) or _retry_after_ms(stream, now_ms)
        return Verdict(OutcomeKind.USAGE_LIMITED, f"usage limit: {message}", retry_at)
    if is_error and (
        (isinstance(status, int) and 500 <= status <= 599)
        or retry_error == "overloaded"
        or (status is None and subtype == "success" and _OVERLOAD_TEXT.search(short))
    ):
        return Verdict(OutcomeKind.TRANSIENT, f"API error: {message}")
    if is_error and status is None and subtype == "success" and _API_ERROR_TEXT.match(short):
        # "API Error: API returned an empty or malformed response" after a cut stream
        return Verdict(OutcomeKind.TRANSIENT, f"API error: {message}")
    if is_error and (status in (401, 403) or retry_error == "authentication_failed" or _AUTH_TEXT.search(short)):
        return Verdict(OutcomeKind.AUTH, f"authentication failed: {message}")
    if is_error and isinstance(status, int) and 400 <= status <= 499:
        # the API refused the request itself (400 invalid, 404 no such model, 413 too large)
        return Verdict(OutcomeKind.FAILED, f"HTTP {status}: {message}")
    if subtype == "error_max_budget_usd" or terminal == "budget_exhausted":
        return Verdict(OutcomeKind.BUDGET, f"budget exhausted: {_errors_text(result) or subtype}")
    if subtype == "error_max_turns" or terminal == "max_turns":
        return Verdict(OutcomeKind.TURNS, f"out of turns: {_errors_text(result) or subtype}")
    if terminal in ("prompt_too_long", "blocking_limit") or (is_error and _CONTEXT_TEXT.search(short)):
        return Verdict(OutcomeKind.CONTEXT, f"context too large: {message}")
    if not is_error and subtype == "success":
        if stream.sandbox_failures:  # the agent may say it is done: its commands never ran
            return Verdict(OutcomeKind.SANDBOX_FAILED, sandbox_failed_error(stream.sandbox_failures))
        return Verdict(OutcomeKind.SUCCESS)
    if not isinstance(subtype, str) or not subtype:
        # valid JSON of another shape (a newer CLI, a wrapper script): say so, not "None: None"
        found = short or _errors_text(result) or "no text"
        return Verdict(OutcomeKind.FAILED, f"a result line of an unexpected shape (no subtype): {found}")
    return Verdict(OutcomeKind.FAILED, f"{subtype}: {message}")


def _retry_after_ms(stream: ClaudeStream, now_ms: int) -> int | None:
    """When an API key's rate limit lifts, as far as the stream says: Claude Code
    prints no reset time for it, but its last retry of the 429 waited what the
    response's ``retry-after`` asked (``retry_delay_ms``). None when it did not
    retry (it gives up at once when ``retry-after`` is long)."""
    retry = stream.last_retry
    if retry is None or retry.get("error_status") != 429:
        return None
    delay = retry.get("retry_delay_ms")
    if not isinstance(delay, int | float) or isinstance(delay, bool) or delay <= 0:
        return None
    return now_ms + int(delay)


def _without_result(stream: ClaudeStream, exit_code: int | None, stderr: str) -> Verdict:
    """No result line: stopped at a refused key, not logged in, refused to start,
    or crashed."""
    if stream.auth_retry is not None:
        retry = stream.auth_retry
        refused = f"HTTP {retry.get('error_status')} {retry.get('error')}"
        return Verdict(OutcomeKind.AUTH, f"authentication failed: the API refused the credentials ({refused})")
    said = error_line(stderr)
    detail = f"no result line (exit code {exit_code})" + (f": {said}" if said else "")
    if _AUTH_TEXT.search(stderr):
        return Verdict(OutcomeKind.AUTH, "not logged in: " + detail)
    # an exit of its own accord (not a signal: 128+n or negative) before starting
    if not stream.started and exit_code is not None and 0 < exit_code < 128 and said:
        return Verdict(OutcomeKind.REFUSED, f"the CLI refused to start (exit code {exit_code}): {said}")
    return Verdict(OutcomeKind.TRANSIENT, "crashed: " + detail)


def _result_text(content: object) -> str:
    """A tool result's text: a string, or the text blocks of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""
