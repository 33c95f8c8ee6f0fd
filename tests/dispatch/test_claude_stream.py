"""The Claude stream classifier on hand-made streams: the order of the table matters."""

from __future__ import annotations

import json
from typing import Any

from dispatch.executors.claude_stream import ClaudeStream, classify
from vigil.models import OutcomeKind

NOW_MS = 1_767_100_000_000


def stream(*lines: dict[str, Any] | bytes) -> ClaudeStream:
    s = ClaudeStream()
    for line in lines:
        s.feed(line if isinstance(line, bytes) else json.dumps(line).encode())
    return s


def result(**fields: Any) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "result": "ok", **fields}


def rate(status: str, resets: int = 1_767_225_600) -> dict[str, Any]:
    return {"type": "rate_limit_event", "rate_limit_info": {"status": status, "resetsAt": resets}}


def retry(error: str, status: int) -> dict[str, Any]:
    return {"type": "system", "subtype": "api_retry", "error": error, "error_status": status}


def kind(s: ClaudeStream, exit_code: int = 0, stderr: str = "") -> OutcomeKind:
    return classify(s, exit_code, stderr, NOW_MS).kind


def test_informational_rate_limit_events_and_recovered_retries_are_success() -> None:
    assert kind(stream(rate("allowed"), rate("allowed_warning"), retry("overloaded", 529), result())) == (
        OutcomeKind.SUCCESS
    )


def test_a_rejected_event_wins_over_everything_after_it() -> None:
    s = stream(rate("rejected"), result(is_error=True, api_error_status=529, result="API Error: 529"))
    verdict = classify(s, 1, "", NOW_MS)
    assert verdict.kind is OutcomeKind.USAGE_LIMITED
    assert verdict.retry_at == 1_767_225_600_000


def test_http_429_without_a_reset_time_leaves_it_to_the_fallback() -> None:
    verdict = classify(stream(result(is_error=True, api_error_status=429, result="Rate limited")), 1, "", NOW_MS)
    assert verdict.kind is OutcomeKind.USAGE_LIMITED
    assert verdict.retry_at is None


def test_a_long_answer_that_mentions_a_usage_limit_is_still_a_success() -> None:
    answer = "I wrote docs about the usage limit reached|1767225600 message. " + "x" * 1000
    assert kind(stream(result(result=answer))) == OutcomeKind.SUCCESS


def test_server_errors_are_transient_and_auth_statuses_are_auth() -> None:
    assert kind(stream(result(is_error=True, api_error_status=500, result="API Error: 500"))) == OutcomeKind.TRANSIENT
    assert kind(stream(retry("overloaded", 529), result(is_error=True, result="x"))) == OutcomeKind.TRANSIENT
    assert kind(stream(result(is_error=True, api_error_status=403, result="Forbidden"))) == OutcomeKind.AUTH
    assert kind(stream(result(is_error=True, result="OAuth token has expired"))) == OutcomeKind.AUTH


def test_context_and_other_errors() -> None:
    assert kind(stream(result(is_error=True, terminal_reason="blocking_limit", result="x"))) == OutcomeKind.CONTEXT
    assert kind(stream(result(subtype="error_during_execution", is_error=True, errors=["tool broke"]))) == (
        OutcomeKind.FAILED
    )
    verdict = classify(stream(result(subtype="error_during_execution", is_error=True, result="")), 1, "", NOW_MS)
    assert verdict.error is not None
    assert "error_during_execution" in verdict.error


def test_no_result_line_is_a_crash_unless_stderr_says_not_logged_in() -> None:
    assert kind(stream(b"banner", {"type": "system", "subtype": "init"}), exit_code=-9) == OutcomeKind.TRANSIENT
    assert kind(stream(), exit_code=1, stderr="Error: not logged in") == OutcomeKind.AUTH


def test_garbage_lines_are_counted_not_fatal() -> None:
    s = stream(b"\xff\xfe", b"[1]", b"null", b'{"type": 5}', {"no_type": True}, result())
    assert s.noise_lines == 3
    assert kind(s) == OutcomeKind.SUCCESS


def test_usage_falls_back_to_the_main_model_when_model_usage_is_missing() -> None:
    s = stream(
        {"type": "system", "subtype": "init", "model": "m1"},
        result(usage={"input_tokens": 5, "output_tokens": 6, "cache_read_input_tokens": 7,
                      "cache_creation_input_tokens": 8}),
    )  # fmt: skip
    usage = s.usage_by_model()
    assert list(usage) == ["m1"]
    assert (usage["m1"].input, usage["m1"].output, usage["m1"].cache_read, usage["m1"].cache_write) == (5, 6, 7, 8)
