"""Agent output of a shape the reference does not describe gets a clear verdict."""

from __future__ import annotations

import json

import pytest

from dispatch.agents.claude.stream import ClaudeStream, classify
from vigil.models import OutcomeKind

pytestmark = pytest.mark.slow


def test_a_result_line_without_subtype_is_a_clear_failure() -> None:
    stream = ClaudeStream()
    stream.feed(b"[1, 2, 3]")
    stream.feed(json.dumps({"type": "result", "result": 42, "total_cost_usd": "lots"}).encode())
    verdict = classify(stream, 0, "", 0)
    assert verdict.kind is OutcomeKind.FAILED
    assert verdict.error == "a result line of an unexpected shape (no subtype): no text"
    assert stream.cost_usd == 0.0


def test_a_result_line_without_subtype_keeps_its_text() -> None:
    stream = ClaudeStream()
    stream.feed(json.dumps({"type": "result", "result": "half done"}).encode())
    verdict = classify(stream, 0, "", 0)
    assert verdict.error == "a result line of an unexpected shape (no subtype): half done"
