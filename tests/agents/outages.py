"""What the limit and outage tests share: subscription logins for Claude Code's
accounts, an alert hook that records to a file, and reading times back.

A Claude Code account is a ``CLAUDE_CONFIG_DIR`` holding a login. Claude Code
2.1.197 reads its login from ``.credentials.json`` in that folder; a token written
there is sent as ``Authorization: Bearer …``, and the local server can tell the
accounts apart by it and answer each from its own script
(``MessagesApi.script_for``).
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

RECORDER = Path(__file__).resolve().parents[1] / "guard" / "alert_recorder.py"
YEAR_S = 365 * 86_400


def subscription_login(config_dir: Path, token: str) -> Path:
    """Make ``config_dir`` a Claude Code folder logged in to a subscription whose
    access token is ``token`` (valid for a year); returns the folder."""
    config_dir.mkdir(parents=True, exist_ok=True)
    login = {
        "claudeAiOauth": {
            "accessToken": token,
            "refreshToken": token + "-refresh",
            "expiresAt": (int(time.time()) + YEAR_S) * 1000,
            "scopes": ["user:inference", "user:profile"],
            "subscriptionType": "max",
        }
    }
    (config_dir / ".credentials.json").write_text(json.dumps(login))
    return config_dir


def alerts_toml(events: Path, held_loop: str | None = None) -> str:
    """The ``[alerts]`` table of a home whose hook appends each event to ``events``;
    ``held_loop``: how long a self-ending hold lasts before it is told (None: 30m)."""
    held = "" if held_loop is None else f'held_loop = "{held_loop}"\n'
    return f"\n[alerts]\ncommand = {json.dumps([sys.executable, str(RECORDER), str(events)])}\n{held}"


def recorded(events: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """The events the hook recorded (of one ``kind``), oldest first."""
    if not events.exists():
        return []
    found = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    return [e for e in found if kind is None or e["event"] == kind]


def epoch_ms(iso: object) -> int:
    """``2026-12-01T02:29:54Z`` (as ``vigil status --json`` shows times) → epoch ms."""
    return int(datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp() * 1000)
