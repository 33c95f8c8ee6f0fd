"""The Claude stream classifier on hand-made streams: the order of the table matters."""

from __future__ import annotations

import json
from typing import Any

from dispatch.agents.claude.stream import ClaudeStream, classify
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


def test_an_api_keys_429_waits_what_the_clis_last_retry_was_told() -> None:
    told = {**retry("rate_limit", 429), "retry_delay_ms": 7000}
    rejected = result(is_error=True, api_error_status=429, result="API Error: Request rejected (429) · slow down")
    verdict = classify(stream(told, rejected), 1, "", NOW_MS)
    assert (verdict.kind, verdict.retry_at) == (OutcomeKind.USAGE_LIMITED, NOW_MS + 7000)
    # a retry of something else says nothing about the rate limit
    other = {**retry("overloaded", 529), "retry_delay_ms": 7000}
    assert classify(stream(other, rejected), 1, "", NOW_MS).retry_at is None


def test_another_4xx_is_a_failure_labelled_with_its_status() -> None:
    bad = result(
        is_error=True, api_error_status=400, result="API Error: 400 messages: text content blocks must be non-empty"
    )
    verdict = classify(stream(bad), 1, "", NOW_MS)
    assert verdict.kind is OutcomeKind.FAILED
    assert verdict.error == "HTTP 400: API Error: 400 messages: text content blocks must be non-empty"


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


def test_garbage_lines_are_not_fatal() -> None:
    s = stream(b"\xff\xfe", b"[1]", b"null", b'{"type": 5}', {"no_type": True}, result())
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


INIT = {"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-opus-4-8"}


def denial(command: str) -> dict[str, Any]:
    return {"tool_name": "Bash", "tool_use_id": "toolu_1", "tool_input": {"command": command}}


def test_denials_are_kept_on_a_success_and_never_make_it_a_refusal() -> None:
    denied = stream(
        INIT,
        result(
            permission_denials=[
                denial("vigil task close 3 --status completed"),
                {"tool_name": "Write", "tool_input": {"a": 1}},
            ]
        ),
    )
    assert kind(denied) == OutcomeKind.SUCCESS
    assert denied.permission_denials == ("Bash: vigil task close 3 --status completed", 'Write: {"a": 1}')


def tool_use(tool_id: str, name: str, given: dict[str, Any]) -> dict[str, Any]:
    block = {"type": "tool_use", "id": tool_id, "name": name, "input": given}
    return {"type": "assistant", "message": {"content": [block]}}


def tool_result(tool_id: str, text: str, *, is_error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": is_error}
    return {"type": "user", "message": {"content": [block]}}


def test_refusals_in_tool_results_are_denials_and_failures_are_not() -> None:
    s = stream(
        INIT,
        tool_use("t1", "Bash", {"command": "echo x >> /home/agent/vigil.toml"}),
        tool_result("t1", "/bin/bash: line 1: /home/agent/vigil.toml: Read-only file system"),
        tool_use("t2", "mcp__vigil__close", {"status": "completed", "summary": "x", "task_id": 2}),
        tool_result("t2", "Error executing tool close: refused: task #2 is not this run's task", is_error=True),
        tool_use("t3", "mcp__vigil__set_priority", {"task_id": 2}),
        tool_result(
            "t3",
            "<tool_use_error>Error: No such tool available: mcp__vigil__set_priority</tool_use_error>",
            is_error=True,
        ),
        # ordinary failures: a failing test, bad arguments to a Vigil tool
        tool_use("t4", "Bash", {"command": "python3 -m unittest"}),
        tool_result("t4", "FAILED (failures=1)", is_error=True),
        tool_use("t5", "mcp__vigil__close", {"status": "weird", "summary": "x"}),
        tool_result("t5", "Error executing tool close: status must be one of completed, …", is_error=True),
        result(permission_denials=[denial("sqlite3 data/vigil.db")]),
    )
    assert s.permission_denials == (
        "Bash: sqlite3 data/vigil.db",
        "Bash: echo x >> /home/agent/vigil.toml (blocked: Read-only file system)",
        'vigil.close: {"status": "completed", "summary": "x", "task_id": 2} (refused: task #2 is not this run\'s task)',
        "mcp__vigil__set_priority: no such tool",
    )
    assert kind(s) == OutcomeKind.SUCCESS


def test_an_exit_before_the_init_line_is_a_refused_start_with_the_clis_own_line() -> None:
    stderr = "WARNING: something harmless\n--dangerously-skip-permissions cannot be used with root/sudo privileges\n"
    verdict = classify(stream(), 1, stderr, NOW_MS)
    assert verdict.kind is OutcomeKind.REFUSED
    assert verdict.error == (
        "the CLI refused to start (exit code 1): "
        "--dangerously-skip-permissions cannot be used with root/sudo privileges"
    )
    # after the init line, an exit without a result is a crash, retried
    assert kind(stream(INIT), exit_code=1, stderr="Killed") == OutcomeKind.TRANSIENT


def test_the_first_retry_of_a_refused_key_is_enough_to_call_it_auth() -> None:
    s = stream(INIT, retry("authentication_failed", 401))
    assert s.auth_retry is not None
    verdict = classify(s, -15, "", NOW_MS)
    assert verdict.kind is OutcomeKind.AUTH
    assert "HTTP 401" in (verdict.error or "")
    assert stream(INIT, retry("overloaded", 529)).auth_retry is None


def test_an_api_error_without_a_status_is_transient() -> None:
    text = "API Error: API returned an empty or malformed response (HTTP 200)"
    assert kind(stream(INIT, result(is_error=True, api_error_status=None, result=text)), exit_code=1) == (
        OutcomeKind.TRANSIENT
    )


def test_a_kill_before_the_init_line_is_a_crash_not_a_refusal() -> None:
    assert kind(stream(), exit_code=137, stderr="Killed") == OutcomeKind.TRANSIENT
    assert kind(stream(), exit_code=-9, stderr="something") == OutcomeKind.TRANSIENT


def test_bash_calls_the_sandbox_could_not_start_make_a_success_sandbox_failed() -> None:
    refused = "Exit code 1\nbwrap: setting up uid map: Permission denied"
    s = stream(
        INIT,
        tool_use("t1", "Bash", {"command": "echo hello > out.txt"}),
        tool_result("t1", refused, is_error=True),
        # bubblewrap's words in a command that succeeded, or in another tool's result, are not it
        tool_use("t2", "Bash", {"command": "cat notes.txt"}),
        tool_result("t2", "bwrap: a line the project's notes happen to hold"),
        tool_use("t3", "Read", {"file_path": "notes.txt"}),
        tool_result("t3", "bwrap: the same line, read", is_error=True),
        result(result="Done: out.txt is written."),
    )
    assert s.sandbox_failures == ["Bash: echo hello > out.txt (bwrap: setting up uid map: Permission denied)"]
    assert s.permission_denials == ()  # not a refusal of the agent
    verdict = classify(s, 0, "", 0)
    assert verdict.kind is OutcomeKind.SANDBOX_FAILED
    assert verdict.error == (
        "the CLI's sandbox did not start 1 command (`vigil doctor` says how to fix it): "
        "Bash: echo hello > out.txt (bwrap: setting up uid map: Permission denied)"
    )
    # a run that failed for another reason is judged by that reason
    limited = stream(INIT, tool_use("t1", "Bash", {"command": "x"}), tool_result("t1", refused, is_error=True))
    limited.feed(json.dumps(result(is_error=True, api_error_status=429, result="API Error: 429")).encode())
    assert kind(limited) is OutcomeKind.USAGE_LIMITED
