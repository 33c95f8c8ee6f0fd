"""What Codex wrote of a run in its own session file: the model's tool calls and
what each one answered, for the refusals ``codex exec --json`` does not print.

Codex 0.171.0 keeps every session in ``$CODEX_HOME/sessions/YYYY/MM/DD/
rollout-<time>-<thread id>.jsonl`` (``CODEX_HOME`` defaults to ``~/.codex``): one
JSON object per line, the model's calls as ``response_item`` payloads of type
``function_call`` (``name``, ``arguments``: a JSON string such as ``{"cmd": "…"}``,
``call_id``) and their answers as ``function_call_output`` (``call_id``,
``output``). Its ``--json`` stream leaves out a command that exited non-zero, and
names a rejected patch or command only in a log line; this file has them all.

A command that Codex's sandbox could not start (its answer: ``Process exited with
code 1`` and bubblewrap's complaint, ``bwrap: execvp codex-linux-sandbox: No such
file or directory``) is a sandbox failure, not a refusal.

What the API's ``x-codex-primary-*`` / ``x-codex-secondary-*`` headers said of the
account's usage windows is kept there too, in ``token_count`` events::

    {"type": "event_msg", "payload": {"type": "token_count", "rate_limits": {"primary":
     {"used_percent": 62.5, "window_minutes": 300, "resets_at": <epoch s>}, "secondary": {…}, …}}}

(``rollout_limits``: the last such report, one ``LimitReport`` per window). The
same object names a state of the account that no reset ends: ``rate_limit_reached_type``
``workspace_owner_credits_depleted``, ``workspace_member_credits_depleted``,
``workspace_owner_usage_limit_reached`` or ``workspace_member_usage_limit_reached``
(from the API's ``x-codex-rate-limit-reached-type``; ``rate_limit_reached`` is only
a window used up), or ``spend_control_reached: true``. It is reported as a rejection
of kind ``spend_control`` with no reset, its reason that name
(``vigil.limit_kinds.person_fix`` says what a person must do).

A refusal is an answer that says Codex's policy rejected the call ("patch
rejected: writing outside of the project", "rm -f style commands are not
permitted") or that the sandbox stopped it (``dispatch.executors.refusals``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dispatch.executors.refusals import denial_line, sandbox_refusal, sandbox_start_failure, unknown_vigil_tool
from vigil.limit_kinds import CODEX_PERMANENT, REJECTED, SPEND_CONTROL, LimitReport, window_kind

# how Codex 0.171.0 heads a command's answer when the command failed
_FAILED = re.compile(r"^Process exited with code [1-9]\d*$", re.MULTILINE)
POLICY_REJECTION = re.compile(r"patch rejected: [^\n]+|rejected: [^\"\\\n]+")


def rollout_path(env: Mapping[str, str], thread_id: str) -> Path | None:
    """The session file of ``thread_id`` under the CLI's ``CODEX_HOME`` (from the
    agent's environment ``env``), or None when there is none."""
    home = env.get("CODEX_HOME") or (str(Path(env["HOME"]) / ".codex") if env.get("HOME") else None)
    if home is None or not thread_id.replace("-", "").isalnum():
        return None
    found = sorted(Path(home, "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
    return found[-1] if found else None


def rollout_refusals(path: Path) -> list[str]:
    """The refused tool calls recorded in the session file at ``path``, one denial
    line each, in order. Lines that are not the expected JSON are skipped. A call
    the sandbox could not start is not a refusal (``rollout_sandbox_failures``)."""
    return [
        denial_line(tool, what, refusal)
        for tool, what, output in _answers(path)
        if sandbox_start_failure(output) is None and (refusal := _refusal(output)) is not None
    ]


def rollout_sandbox_failures(path: Path) -> list[str]:
    """The tool calls in the session file at ``path`` that failed because Codex's
    sandbox could not start them (``bwrap: …`` in the output of a command that
    exited non-zero), one line each, in order."""
    found = []
    for tool, what, output in _answers(path):
        failure = sandbox_start_failure(output) if _FAILED.search(output) else None
        if failure is not None:
            found.append(denial_line(tool, what, failure))
    return found


def rollout_limits(path: Path) -> list[LimitReport]:
    """The usage windows the last ``rate_limits`` in the session file at ``path``
    reported (primary, then secondary): a window used up (100 %) is ``rejected``."""
    last: dict[str, Any] = {}
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if '"rate_limits"' in line:
                limits = _payload(line).get("rate_limits")
                last = limits if isinstance(limits, dict) else last
    found = [report for name in ("primary", "secondary") if (report := _window(last.get(name))) is not None]
    state = _account_state(last)
    return found if state is None else [*found, state]


def _account_state(limits: dict[str, Any]) -> LimitReport | None:
    """The state only a person ends that ``rate_limits`` names (None: none)."""
    reached = limits.get("rate_limit_reached_type")
    if reached in CODEX_PERMANENT:
        return LimitReport(status=REJECTED, kind=SPEND_CONTROL, overage_reason=str(reached))
    if limits.get("spend_control_reached") is True:
        return LimitReport(status=REJECTED, kind=SPEND_CONTROL, overage_reason="spend_control_reached")
    return None


def _window(value: object) -> LimitReport | None:
    """One window of Codex's ``rate_limits`` (None when absent or unreadable)."""
    if not isinstance(value, dict):
        return None
    used, minutes, resets = value.get("used_percent"), value.get("window_minutes"), value.get("resets_at")
    if not isinstance(used, int | float) or isinstance(used, bool):
        return None
    window = minutes if isinstance(minutes, int) and minutes > 0 else None
    return LimitReport(
        status="rejected" if used >= 100 else "allowed",
        kind="" if window is None else window_kind(window),
        resets_at=resets * 1000 if isinstance(resets, int) and resets > 0 else None,
        utilization=min(max(float(used) / 100, 0.0), 1.0),
        window_ms=None if window is None else window * 60_000,
    )


def _answers(path: Path) -> Iterator[tuple[str, str, str]]:
    """Each answered tool call in the session file: (tool, what it was asked, the
    answer's text)."""
    calls: dict[str, tuple[str, str]] = {}
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if '"function_call' not in line:
                continue
            payload = _payload(line)
            kind = payload.get("type")
            if kind == "function_call":
                calls[str(payload.get("call_id"))] = (str(payload.get("name") or "?"), _what(payload.get("arguments")))
            elif kind == "function_call_output":
                tool, what = calls.get(str(payload.get("call_id")), ("?", ""))
                yield tool, what, _text(payload.get("output"))


def _payload(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError:
        return {}
    payload = record.get("payload") if isinstance(record, dict) else None
    return payload if isinstance(payload, dict) else {}


def _what(arguments: object) -> str:
    """A call's command (``cmd``), else its arguments as they came."""
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return str(arguments)
    command = parsed.get("cmd") if isinstance(parsed, dict) else None
    if isinstance(command, str):
        return command.strip()
    return json.dumps(parsed, sort_keys=True)


def _text(output: object) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        return str(output.get("content") or output.get("output") or "")
    return json.dumps(output)


def _refusal(output: str) -> str | None:
    if unknown_vigil_tool(output) is not None:
        return "no such tool"
    rejected = POLICY_REJECTION.search(output)
    if rejected is not None:
        return rejected.group(0).strip()
    blocked = sandbox_refusal(output)
    return None if blocked is None else f"blocked: {blocked}"
