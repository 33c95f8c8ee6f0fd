"""What Claude Code wrote of a session in its own session file: the usage of each
model call, for a run whose stream was lost (its dispatcher died: ``dispatch.salvage``).

Claude Code 2.1.197 keeps each session in ``$CLAUDE_CONFIG_DIR/projects/<slug>/
<session id>.jsonl`` (``CLAUDE_CONFIG_DIR`` defaults to ``~/.claude``; the slug is
the working directory with every character but letters and digits made ``-``,
so the file is looked up by its id in every project folder). One JSON object per
line; each answer of the model is written as it completes, one line per content
block (a text and a tool call: two lines with the same message id and usage)::

    {"type": "assistant", "timestamp": "2026-12-04T21:38:34.419Z", "sessionId": …,
     "message": {"id": "msg_…", "model": "claude-…", "usage": {"input_tokens": 120,
     "cache_creation_input_tokens": 20, "cache_read_input_tokens": 40, "output_tokens": 30}}}

so a process killed mid-run leaves every answer it was billed for. A sub-agent's
answers (the ``Agent`` tool) are kept beside it, in ``<session id>/subagents/
agent-<id>.jsonl``, in the same form. A resumed session (``--resume``) keeps its
id and appends to the same files: what one run spent is what was written from
its start on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dispatch.agents.pricing import TokenUsage
from vigil.clock import parse_iso_ms


def config_dir(env: Mapping[str, str]) -> Path | None:
    """Claude Code's folder in the agent's environment ``env``: ``CLAUDE_CONFIG_DIR``,
    else ``~/.claude``; None when neither can be told."""
    if env.get("CLAUDE_CONFIG_DIR"):
        return Path(env["CLAUDE_CONFIG_DIR"])
    return Path(env["HOME"]) / ".claude" if env.get("HOME") else None


def session_path(env: Mapping[str, str], session_id: str) -> Path | None:
    """The session file of ``session_id`` under the agent's Claude Code folder, or
    None when there is none (or the id is not one Claude Code makes)."""
    folder = config_dir(env)
    if folder is None or not session_id.replace("-", "").isalnum():
        return None
    found = sorted((folder / "projects").glob(f"*/{session_id}.jsonl"))
    return found[-1] if found else None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _tokens(usage: Mapping[str, Any]) -> TokenUsage:
    return TokenUsage(
        input=_count(usage.get("input_tokens")),
        output=_count(usage.get("output_tokens")),
        cache_read=_count(usage.get("cache_read_input_tokens")),
        cache_write=_count(usage.get("cache_creation_input_tokens")),
    )


def session_usage(path: Path, since_ms: int | None = None) -> dict[str, TokenUsage]:
    """The tokens of every model answer in the session file at ``path`` and its
    sub-agents' files written at or after ``since_ms`` (epoch ms; None: all),
    summed by model, each answer counted once. Lines that are not the expected
    JSON are skipped; raises ``OSError`` when a file cannot be read."""
    answers: dict[str, tuple[str, TokenUsage]] = {}
    for file in [path, *sorted((path.parent / path.stem).glob("subagents/*.jsonl"))]:
        _read_answers(file, since_ms, answers)
    by_model: dict[str, TokenUsage] = {}
    for model, tokens in answers.values():
        if tokens == TokenUsage():
            continue  # an answer Claude Code made up itself (model "<synthetic>"): no call
        by_model[model] = by_model.get(model, TokenUsage()) + tokens
    return by_model


def _read_answers(path: Path, since_ms: int | None, answers: dict[str, tuple[str, TokenUsage]]) -> None:
    """Add each model answer of the file at ``path`` written at or after
    ``since_ms`` to ``answers``, by message id (the last line of an answer wins)."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines):
            if '"assistant"' not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            message = record.get("message") if isinstance(record, dict) else None
            if record.get("type") != "assistant" or not isinstance(message, dict):
                continue
            usage = message.get("usage")
            at = parse_iso_ms(record.get("timestamp"))
            if not isinstance(usage, dict) or (since_ms is not None and (at is None or at < since_ms)):
                continue
            key = str(message.get("id") or f"{path.name} line {number}")
            answers[key] = (str(message.get("model") or "unknown"), _tokens(usage))
