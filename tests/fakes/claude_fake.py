#!/usr/bin/env python3
"""A fake ``claude`` that prints the real ``--output-format stream-json`` shapes.

Usage: ``claude_fake.py [SCENARIO] [--record F] [--sleep S] [--pid-file F] [--exit N]
[--ignore-term] --print --verbose --output-format stream-json [--model M] …``.
The prompt is read from stdin. Scenarios: success, overloaded, auth, not_logged_in,
usage_limit (rate_limit_event rejected), usage_limit_prose (no event, reset in
prose), usage_limit_old (``…|<epoch>`` text, is_error false, exit 0), max_turns,
budget, prompt_too_long, crash, noise, big (a 10 MB answer), echo (the prompt is
the answer), sleep, sleep_child (a child that ignores SIGTERM), exit.
"""

from __future__ import annotations

import sys
import time

from common import emit, parse, raw, read_stdin, record, sleep, sleep_with_child

SESSION = "f9356e8d-5c2b-4a11-9d0b-7f3c2e1a0b9c"
MODEL = "claude-opus-4-6"
RESET_EPOCH = 1767225600
BIG_CHARS = 10 * 1024 * 1024


def init(model: str) -> None:
    emit(
        {
            "type": "system",
            "subtype": "init",
            "session_id": SESSION,
            "model": model,
            "tools": ["Bash", "Read", "Edit"],
            "claude_code_version": "2.1.3",
            "cwd": "/x",
        }
    )


def assistant(text: str, model: str) -> None:
    emit(
        {
            "type": "assistant",
            "session_id": SESSION,
            "message": {
                "model": model,
                "content": [{"type": "text", "text": text}],
                "usage": {"input_tokens": 4, "output_tokens": 10},
            },
        }
    )


def result(
    text: str,
    *,
    subtype: str = "success",
    is_error: bool = False,
    cost: float = 0.032543,
    model_usage: dict[str, dict[str, float]] | None = None,
    **extra: object,
) -> None:
    body = {
        "type": "result",
        "subtype": subtype,
        "is_error": is_error,
        "duration_ms": 6052,
        "duration_api_ms": 5995,
        "num_turns": 2,
        "result": text,
        "stop_reason": None,
        "session_id": SESSION,
        "total_cost_usd": cost,
        "usage": {
            "input_tokens": 4,
            "cache_creation_input_tokens": 1694,
            "cache_read_input_tokens": 38821,
            "output_tokens": 101,
        },
        "modelUsage": model_usage if model_usage is not None else {},
        "permission_denials": [],
        "uuid": "7a4c",
    }
    body.update(extra)
    emit(body)


TWO_MODELS = {
    MODEL: {
        "inputTokens": 4,
        "outputTokens": 101,
        "cacheReadInputTokens": 38821,
        "cacheCreationInputTokens": 1694,
        "costUSD": 0.030543,
        "contextWindow": 200000,
    },
    "claude-haiku-4-5": {
        "inputTokens": 300,
        "outputTokens": 50,
        "cacheReadInputTokens": 0,
        "cacheCreationInputTokens": 100,
        "costUSD": 0.002,
        "webSearchRequests": 0,
    },
}


def api_retry(status: int, error: str, attempt: int = 1) -> None:
    emit(
        {
            "type": "system",
            "subtype": "api_retry",
            "attempt": attempt,
            "max_retries": 10,
            "retry_delay_ms": 600,
            "error_status": status,
            "error": error,
            "session_id": SESSION,
        }
    )


def main() -> int:
    opts, flags = parse(sys.argv[1:])
    stdin = read_stdin()
    record(opts.record, stdin)
    if "--print" not in flags or "stream-json" not in flags:
        print("Error: expected --print --output-format stream-json", file=sys.stderr)
        return 1
    if "--verbose" not in flags:
        print("Error: When using --print, --output-format=stream-json requires --verbose", file=sys.stderr)
        return 1
    model = flags[flags.index("--model") + 1] if "--model" in flags else MODEL
    s = opts.scenario

    if s in ("success", "echo"):
        init(model)
        emit(
            {
                "type": "rate_limit_event",
                "rate_limit_info": {"status": "allowed", "resetsAt": RESET_EPOCH, "rateLimitType": "five_hour"},
            }
        )
        assistant("Let me look.", model)
        emit(
            {
                "type": "assistant",
                "session_id": SESSION,
                "message": {
                    "model": model,
                    "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
                },
            }
        )
        emit(
            {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a\nb"}]}}
        )
        answer = stdin if s == "echo" else "Done: the inbox is triaged.\n\nThree items closed."
        assistant(answer, model)
        result(answer, model_usage=TWO_MODELS, terminal_reason="completed")
        return 0
    if s == "overloaded":
        init(model)
        for attempt in (1, 2, 3):
            api_retry(529, "overloaded", attempt)
        body = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
        result(f"API Error: 529 {body}", is_error=True, cost=0, api_error_status=529)
        return 1
    if s == "auth":
        init(model)
        api_retry(401, "authentication_failed")
        result("Invalid API key · Please run /login", is_error=True, cost=0, api_error_status=401)
        return 1
    if s == "not_logged_in":
        print("Error: Not logged in. Please run /login", file=sys.stderr)
        return 1
    if s == "usage_limit":
        init(model)
        emit(
            {
                "type": "rate_limit_event",
                "rate_limit_info": {"status": "rejected", "resetsAt": RESET_EPOCH, "rateLimitType": "five_hour"},
            }
        )
        result(
            "You've hit your session limit · resets 4:50pm (America/Denver)",
            is_error=True,
            cost=0,
            api_error_status=429,
        )
        return 1
    if s == "usage_limit_prose":
        init(model)
        result(
            "You've hit your session limit · resets 4:50pm (America/Denver)",
            is_error=True,
            cost=0,
            api_error_status=429,
        )
        return 1
    if s == "usage_limit_old":
        init(model)
        result(f"Claude AI usage limit reached|{RESET_EPOCH}", is_error=False, cost=0)
        return 0
    if s == "max_turns":
        init(model)
        assistant("Working on it.", model)
        result(
            "",
            subtype="error_max_turns",
            is_error=True,
            cost=0.5,
            model_usage=TWO_MODELS,
            errors=["Reached maximum number of turns (3)"],
            terminal_reason="max_turns",
        )
        return 1
    if s == "budget":
        init(model)
        result(
            "",
            subtype="error_max_budget_usd",
            is_error=True,
            cost=2.01,
            model_usage=TWO_MODELS,
            errors=["Reached maximum budget ($2)"],
            terminal_reason="budget_exhausted",
        )
        return 1
    if s == "prompt_too_long":
        init(model)
        result("Prompt is too long", is_error=True, cost=0, terminal_reason="prompt_too_long")
        return 1
    if s == "crash":
        init(model)
        assistant("Starting…", model)
        sys.stdout.write('{"type":"assistant","message":{"content":[{"type":"te')
        sys.stdout.flush()
        print("Error: unexpected end of stream (ECONNRESET)", file=sys.stderr)
        return 1
    if s == "noise":
        raw("Claude Code v2.1.3 — welcome!")
        raw(b"\xff\xfe not utf-8 \xc3")
        raw("[1, 2, 3]")
        raw("")
        init(model)
        emit({"type": "stream_event", "event": {"type": "content_block_delta"}, "brand_new_field": {"x": 1}})
        emit({"type": "system", "subtype": "hook_response", "whatever": True})
        raw("{not json at all")
        assistant("All good.", model)
        result("All good.", model_usage=TWO_MODELS, some_future_field=[1, 2])
        raw("goodbye banner")
        return 0
    if s == "big":
        init(model)
        answer = "A" * (BIG_CHARS - 10) + "THE-END-XY"
        assistant(answer, model)
        result(answer, model_usage=TWO_MODELS)
        return 0
    if s == "sleep":
        init(model)
        sleep(opts)
        result("woke up", model_usage=TWO_MODELS)
        return 0
    if s == "sleep_child":
        init(model)
        sleep_with_child(opts)
        result("woke up", model_usage=TWO_MODELS)
        return 0
    if s == "exit":
        return opts.exit
    print(f"claude_fake: unknown scenario {s!r}", file=sys.stderr)
    time.sleep(0)
    return 2


if __name__ == "__main__":
    sys.exit(main())
