"""Codex's usage while its run goes on, from its session file.

``codex exec --json`` reports usage only in ``turn.completed``, and a ``codex
exec`` run is one turn: its stream says what was spent only once the run is over.
Its session file (``codex_rollout``) says more as it goes: after each model
response Codex 0.171.0 appends an ``event_msg`` of type ``token_count`` whose
``info.total_token_usage`` is the run's usage so far (``input_tokens``, of them
``cached_input_tokens`` read from the cache and ``cache_write_input_tokens``
written to it, ``output_tokens``). ``SessionUsage`` reads the lines appended since
its last look, so the dispatcher can meter a Codex run per response, as it does a
Claude run per message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dispatch.agents.codex.rollout import rollout_path
from dispatch.agents.pricing import TokenUsage
from vigil.clock import parse_iso_ms

MARK = b'"token_count"'


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def codex_tokens(usage: Mapping[str, Any]) -> TokenUsage:
    """Codex's usage object as token counts, cached reads and writes taken out of
    ``input`` (OpenAI counts them in it; Vigil's ``input`` is neither)."""
    cached = _count(usage.get("cached_input_tokens"))
    written = _count(usage.get("cache_write_input_tokens"))
    return TokenUsage(
        input=max(_count(usage.get("input_tokens")) - cached - written, 0),
        output=_count(usage.get("output_tokens")),
        cache_read=cached,
        cache_write=written,
    )


class SessionUsage:
    """The latest ``total_token_usage`` in one run's session file, read on demand
    (``read``) from where the last look stopped; the file is found once Codex has
    named its thread. Not thread-safe: called from the run's line reader."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        self._path: Path | None = None
        self._offset = 0
        self._partial = b""
        self.usage: TokenUsage | None = None

    def read(self, thread_id: str | None) -> TokenUsage | None:
        """The run's usage so far as its session file says it (None: nothing yet)."""
        if self._path is None:
            self._path = None if thread_id is None else rollout_path(self._env, thread_id)
            if self._path is None:
                return self.usage
        try:
            with self._path.open("rb") as session:
                session.seek(self._offset)
                data = session.read()
        except OSError:
            return self.usage
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            if MARK in line:
                self._token_count(line)
        return self.usage

    def _token_count(self, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return
        payload = record.get("payload") if isinstance(record, dict) else None
        info = payload.get("info") if isinstance(payload, dict) else None
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if isinstance(total, dict):
            self.usage = codex_tokens(total)


def less(total: TokenUsage, before: TokenUsage) -> TokenUsage:
    """``total`` without ``before`` (each count at least 0): one run's share of a
    thread's running total."""
    return TokenUsage(
        input=max(total.input - before.input, 0),
        output=max(total.output - before.output, 0),
        cache_read=max(total.cache_read - before.cache_read, 0),
        cache_write=max(total.cache_write - before.cache_write, 0),
    )


def thread_usage(path: Path, since_ms: int | None = None) -> tuple[TokenUsage, str | None]:
    """What the session file at ``path`` records as spent from ``since_ms`` (epoch
    ms; None: ever) on: the last ``total_token_usage`` less the last one written
    before ``since_ms`` (a resumed thread's total counts its earlier runs), and the
    model of its last ``turn_context`` (None: none named). Raises ``OSError`` when
    the file cannot be read; lines that are not the expected JSON are skipped."""
    before = last = TokenUsage()
    model = None
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if '"token_count"' not in line and '"turn_context"' not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            payload = record.get("payload") if isinstance(record, dict) else None
            if not isinstance(payload, dict):
                continue
            if record.get("type") == "turn_context" and isinstance(payload.get("model"), str):
                model = payload["model"]
            info = payload.get("info") if payload.get("type") == "token_count" else None
            total = info.get("total_token_usage") if isinstance(info, dict) else None
            if not isinstance(total, dict):
                continue
            last = codex_tokens(total)
            at = parse_iso_ms(record.get("timestamp"))
            if since_ms is not None and at is not None and at < since_ms:
                before = last
    return less(last, before), model


def last_rate_limits(path: Path) -> dict[str, Any] | None:
    """The ``rate_limits`` of the last ``token_count`` in the session file at
    ``path``: what the API's headers told Codex of the account's windows
    (``primary``, ``secondary``: ``used_percent``, ``window_minutes``,
    ``resets_at`` in epoch seconds; ``rate_limit_reached_type``). None when the file
    has none. Raises ``OSError`` when it cannot be read."""
    found = None
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if '"rate_limits"' not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            payload = record.get("payload") if isinstance(record, dict) else None
            limits = payload.get("rate_limits") if isinstance(payload, dict) else None
            if isinstance(limits, dict):
                found = limits
    return found
