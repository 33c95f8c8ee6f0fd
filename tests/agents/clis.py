"""Where the real agent CLIs are installed, and pytest markers that skip without them.

The CLIs are looked up in the folder ``VIGIL_AGENT_CLIS`` names (a
``node_modules/.bin``), else in ``~/.cache/vigil/agent-clis/node_modules/.bin``
(where ``make agent-clis``, which ``make test`` runs first, installs the pinned
versions), else on ``PATH``. They are node programs, so ``node`` must be on
``PATH`` too. A test that needs one is marked ``@needs_claude`` /
``@needs_codex`` and is skipped, with the reason, when it is missing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

BIN_ENV = "VIGIL_AGENT_CLIS"
DEFAULT_BIN = Path.home() / ".cache" / "vigil" / "agent-clis" / "node_modules" / ".bin"
PINNED = {"claude": "2.1.197", "codex": "0.171.0"}  # the versions `make agent-clis` installs


def bin_dir() -> Path:
    """The folder searched before ``PATH``."""
    configured = os.environ.get(BIN_ENV)
    return Path(configured).expanduser() if configured else DEFAULT_BIN


def find_cli(name: str) -> Path | None:
    """The path of CLI ``name`` (``claude`` or ``codex``), or None when not installed."""
    candidate = bin_dir() / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which(name)
    return Path(found) if found else None


def missing_reason(name: str) -> str | None:
    """Why CLI ``name`` cannot run here, or None when it can. The text is the skip
    reason, which the summary at the end of `make test` groups tests by: it says
    what would run the test, and is the same for both CLIs when node is missing."""
    if shutil.which("node") is None:
        return (
            "the real Claude Code and Codex CLIs need node, which is not on PATH:"
            " install node and npm, and `make test` installs the pinned CLIs"
        )
    if find_cli(name) is None:
        return f"the real {name} CLI is not in {bin_dir()} nor on PATH: `make agent-clis` installs it (npm, network)"
    return None


def needs(name: str) -> pytest.MarkDecorator:
    reason = missing_reason(name)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


needs_claude = needs("claude")
needs_codex = needs("codex")
# Claude Code's OS sandbox for Bash on Linux (what `vigil doctor` reports as ok)
needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("socat") is None,
    reason="Claude Code's sandbox needs bwrap and socat, not found: install bubblewrap and socat",
)


def claude_path() -> Path:
    """The claude CLI; only call it from a test marked ``@needs_claude``."""
    path = find_cli("claude")
    assert path is not None, missing_reason("claude")
    return path


def codex_path() -> Path:
    """The codex CLI; only call it from a test marked ``@needs_codex``."""
    path = find_cli("codex")
    assert path is not None, missing_reason("codex")
    return path


def claude_env(base_url: str, config_dir: Path, path: str | None = None) -> dict[str, str]:
    """A complete environment for the real Claude Code talking only to the local
    model server at ``base_url``: a throwaway key, no non-essential traffic, its own
    config folder (so the operator's login and settings stay out of the test), and
    a single retry of a failed API call so that error tests do not wait minutes."""
    return {
        "PATH": path or os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(config_dir),
        "CLAUDE_CONFIG_DIR": str(config_dir / ".claude"),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-test-0000",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
