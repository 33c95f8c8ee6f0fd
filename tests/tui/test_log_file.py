"""The TUI's log (logs/tui.log) is private like the daemon's: 0600, secrets masked."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tui.app import configure_logging
from tui.context import log


def test_tui_log_is_0600_and_masks_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    path = tmp_path / "logs" / "tui.log"
    before = list(log.handlers)
    configure_logging(path)
    try:
        log.error("request failed with key %s", secret)
        for handler in log.handlers:
            handler.flush()
    finally:
        for handler in set(log.handlers) - set(before):
            log.removeHandler(handler)
            handler.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    text = path.read_text()
    assert "request failed with key" in text
    assert secret not in text
