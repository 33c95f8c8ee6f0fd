#!/usr/bin/env python3
"""A fake ``codex`` that prints the real ``codex exec --json`` event shapes.

Usage: ``codex_fake.py [SCENARIO] [--record F] [--sleep S] [--pid-file F]
[--exit N] [--ignore-term] exec --json [--model M] …``; the prompt on stdin.
Scenarios: success (two turns), turn_failed, usage_limit, noise, echo, sleep,
sleep_child, exit.
"""

from __future__ import annotations

import sys

from common import emit, parse, raw, read_stdin, record, sleep, sleep_with_child


def turn(message: str, usage: dict[str, int]) -> None:
    emit({"type": "turn.started"})
    emit(
        {
            "type": "item.started",
            "item": {
                "id": "i0",
                "type": "command_execution",
                "command": "ls",
                "aggregated_output": "",
                "exit_code": None,
                "status": "in_progress",
            },
        }
    )
    emit(
        {
            "type": "item.completed",
            "item": {
                "id": "i0",
                "type": "command_execution",
                "command": "ls",
                "aggregated_output": "a\nb\n",
                "exit_code": 0,
                "status": "completed",
            },
        }
    )
    emit({"type": "item.completed", "item": {"id": "i1", "type": "reasoning", "text": "thinking"}})
    emit({"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "text": message}})
    emit({"type": "turn.completed", "usage": usage})


USAGE_1 = {"input_tokens": 37067, "cached_input_tokens": 26880, "output_tokens": 850, "reasoning_output_tokens": 497}
USAGE_2 = {"input_tokens": 1000, "cached_input_tokens": 500, "output_tokens": 150, "reasoning_output_tokens": 20}


def main() -> int:
    opts, flags = parse(sys.argv[1:])
    stdin = read_stdin()
    record(opts.record, stdin)
    if flags[:2] != ["exec", "--json"]:
        print("error: expected `exec --json`", file=sys.stderr)
        return 2
    s = opts.scenario
    emit({"type": "thread.started", "thread_id": "01a03463"})
    if s in ("success", "echo", "noise"):
        if s == "noise":
            raw("Reading prompt from stdin...")
            raw(b"\xff bad bytes")
        turn("First look done.", USAGE_1)
        turn(stdin if s == "echo" else "Final: all three feeds summarised.", USAGE_2)
        return 0
    if s == "turn_failed":
        emit({"type": "turn.started"})
        emit({"type": "error", "message": "Reconnecting... 1/5"})
        emit({"type": "turn.failed", "error": {"message": "stream disconnected before completion"}})
        return 1
    if s == "usage_limit":
        emit({"type": "turn.started"})
        emit({"type": "error", "message": "You've hit your usage limit. Please try again at Apr 11th, 2026 2:32 PM."})
        emit(
            {
                "type": "turn.failed",
                "error": {"message": "You've hit your usage limit. Please try again at Apr 11th, 2026 2:32 PM."},
            }
        )
        return 1
    if s == "sleep":
        sleep(opts)
        turn("woke up", USAGE_2)
        return 0
    if s == "sleep_child":
        sleep_with_child(opts)
        turn("woke up", USAGE_2)
        return 0
    if s == "exit":
        return opts.exit
    print(f"codex_fake: unknown scenario {s!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
