"""Reading ``codex exec --json`` lines and classifying the end of a run: the shapes
and texts below are what the real Codex 0.171.0 printed against a local server."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from dispatch.agents.codex.stream import CodexStream, classify, retry_note, stderr_error
from vigil.models import OutcomeKind

PATH_WARNING = (
    "WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper "
    'binaries under temporary dir "/tmp" (codex_home: AbsolutePathBuf("/tmp/x"))'
)
NOW_MS = int(datetime(2026, 12, 1, 14, 0).timestamp() * 1000)


def feed(stream: CodexStream, *events: dict[str, object]) -> CodexStream:
    for event in events:
        stream.feed(json.dumps(event).encode())
    return stream


def completed(**usage: int) -> dict[str, object]:
    return {"type": "turn.completed", "usage": usage}


def test_reconnecting_is_progress_and_a_later_completed_turn_is_a_success() -> None:
    notes: list[str | None] = []
    stream = feed(
        CodexStream(on_progress=notes.append),
        {"type": "thread.started", "thread_id": "t1"},
        {"type": "turn.started"},
        {"type": "error", "message": "Reconnecting... 1/5 (stream disconnected before completion: boom)"},
        {"type": "error", "message": "Reconnecting... waiting for network"},
        {"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": "Done."}},
        completed(input_tokens=100, cached_input_tokens=40, cache_write_input_tokens=25, output_tokens=7),
    )
    assert notes == [
        "API retry 1/5: stream disconnected before completion: boom",
        "API retry: waiting for network",
        None,
    ]
    assert classify(stream, 0, "", NOW_MS).kind is OutcomeKind.SUCCESS
    # input excludes what was read from and written to the cache
    assert (stream.usage.input, stream.usage.cache_read, stream.usage.cache_write) == (35, 40, 25)
    assert stream.usage.output == 7


def test_a_failed_turn_after_retries_names_the_failure_not_the_retry() -> None:
    stream = feed(
        CodexStream(),
        {"type": "turn.started"},
        {"type": "error", "message": "Reconnecting... 1/1 (stream disconnected before completion: cut)"},
        {"type": "error", "message": "stream disconnected before completion: stream closed before response.completed"},
        {"type": "turn.failed", "error": {"message": "stream disconnected before completion: stream closed"}},
    )
    verdict = classify(stream, 1, PATH_WARNING, NOW_MS)
    assert verdict.kind is OutcomeKind.TRANSIENT
    assert verdict.error == "stream disconnected before completion: stream closed"


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("unexpected status 401 Unauthorized: invalid key, url: http://127.0.0.1:1/v1/responses", OutcomeKind.AUTH),
        ("unexpected status 403 Forbidden: no, url: http://127.0.0.1:1/v1/responses", OutcomeKind.AUTH),
        ("Missing environment variable: `OPENAI_API_KEY`.", OutcomeKind.AUTH),
        ("exceeded retry limit, last status: 429 Too Many Requests", OutcomeKind.USAGE_LIMITED),
        ("We\u2019re currently experiencing high demand, which may cause temporary errors.", OutcomeKind.TRANSIENT),
        ("the model said no", OutcomeKind.FAILED),
    ],
)
def test_failures_are_classified_by_what_codex_says(message: str, kind: OutcomeKind) -> None:
    stream = feed(CodexStream(), {"type": "turn.failed", "error": {"message": message}})
    assert classify(stream, 1, "", NOW_MS).kind is kind


def test_the_apis_own_refusal_of_a_request_is_a_failure_that_says_so() -> None:
    body = '{"error": {"type": "invalid_request_error", "message": "Invalid \'input\': bad thing", "code": "x"}}'
    stream = feed(
        CodexStream(), {"type": "error", "message": body}, {"type": "turn.failed", "error": {"message": body}}
    )
    verdict = classify(stream, 1, "", NOW_MS)
    assert verdict.kind is OutcomeKind.FAILED
    assert verdict.error == "the API refused the request (invalid_request_error): Invalid 'input': bad thing"


def test_a_usage_limit_reset_named_as_a_time_of_day_is_the_end_of_that_minute_on_the_nearest_day() -> None:
    message = (
        "You\u2019ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit "
        "https://chatgpt.com/settings/usage to purchase more credits or try again at 3:46 PM."
    )
    stream = feed(
        CodexStream(), {"type": "error", "message": message}, {"type": "turn.failed", "error": {"message": message}}
    )
    verdict = classify(stream, 1, "", NOW_MS)
    assert verdict.kind is OutcomeKind.USAGE_LIMITED
    assert verdict.retry_at == int(datetime(2026, 12, 1, 15, 47).timestamp() * 1000)
    later = int(datetime(2026, 12, 1, 17, 0).timestamp() * 1000)
    assert classify(stream, 1, "", later).retry_at == int(datetime(2026, 12, 2, 15, 47).timestamp() * 1000)


@pytest.mark.parametrize(
    ("stderr", "line"),
    [
        (
            f"{PATH_WARNING}\nReading prompt from stdin...\n"
            "Not inside a trusted directory and --skip-git-repo-check was not specified.\n",
            "Not inside a trusted directory and --skip-git-repo-check was not specified.",
        ),
        (
            f"{PATH_WARNING}\nerror: unexpected argument '--bogus' found\n\n"
            "  tip: to pass '--bogus' as a value, use '-- --bogus'\n\nUsage: codex exec [OPTIONS] [PROMPT]\n",
            "error: unexpected argument '--bogus' found",
        ),
        (
            f"{PATH_WARNING}\nError: No such file or directory (os error 2)\n\nStack backtrace:\n   0: <unknown>\n",
            "Error: No such file or directory (os error 2)",
        ),
        (f"{PATH_WARNING}\nReading prompt from stdin...\n", None),
    ],
)
def test_the_stored_error_is_the_meaningful_stderr_line(stderr: str, line: str | None) -> None:
    assert stderr_error(stderr) == line


def test_an_exit_before_any_event_is_a_refusal_with_codex_own_reason() -> None:
    refusal = "Not inside a trusted directory and --skip-git-repo-check was not specified."
    stderr = f"{PATH_WARNING}\nReading prompt from stdin...\n{refusal}\n"
    verdict = classify(CodexStream(), 1, stderr, NOW_MS)
    assert verdict.kind is OutcomeKind.REFUSED
    assert verdict.error is not None
    assert verdict.error.endswith(refusal)
    assert "WARNING" not in verdict.error


def test_a_crash_after_events_or_by_signal_is_transient() -> None:
    started = feed(CodexStream(), {"type": "thread.started", "thread_id": "t"})
    assert classify(started, 3, "", NOW_MS).kind is OutcomeKind.TRANSIENT
    assert classify(CodexStream(), -9, "", NOW_MS).kind is OutcomeKind.TRANSIENT


def test_retry_note_only_reads_codex_retry_notices() -> None:
    assert retry_note("Reconnecting... 2/5 (unexpected status 500)") == "API retry 2/5: unexpected status 500"
    assert retry_note("You've hit your usage limit.") is None
    assert len(retry_note("Reconnecting... 1/5 (" + "x" * 500 + ")") or "") == 120


def mcp_call(tool: str, arguments: dict[str, object], text: str, status: str) -> dict[str, object]:
    """An ``mcp_tool_call`` item as Codex 0.171.0 prints it once the call ended."""
    result = {"content": [{"type": "text", "text": text}], "structured_content": None}
    item = {"type": "mcp_tool_call", "server": "vigil", "tool": tool, "arguments": arguments}
    return {"type": "item.completed", "item": {"id": "i", **item, "result": result, "error": None, "status": status}}


def test_a_refusal_of_vigils_tools_is_kept_and_their_other_failures_are_not() -> None:
    refused = "Error executing tool close: refused: task #2 is not this run's task; this run may only change task #1"
    stream = feed(
        CodexStream(),
        mcp_call("note", {"text": "hi"}, "noted on task #1", "completed"),
        mcp_call("close", {"status": "completed", "summary": "x", "task_id": 2}, refused, "failed"),
        mcp_call("close", {"status": "weird", "summary": "x"}, "Error executing tool close: status must be", "failed"),
    )
    assert stream.refusals == [
        'vigil.close: {"status": "completed", "summary": "x", "task_id": 2} '
        "(refused: task #2 is not this run's task; this run may only change task #1)"
    ]
