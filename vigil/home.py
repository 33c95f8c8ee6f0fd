"""Finding and creating a home: the folder with vigil.toml, the database, skills/, logs/.

Found from ``--home``, then ``VIGIL_HOME``, then the nearest ``vigil.toml`` upwards
from the current folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from vigil.config import CONFIG_NAME
from vigil.errors import HomeError

NEW_HOME_CONFIG = """\
# Vigil home. Every key is described in docs/configuration.md.

[dispatch]
# dry-run builds the prompt and stores it, spending nothing. Switch to "claude" or
# "codex" once the agent CLI is installed and logged in.
executor = "dry-run"
timeout = "30m"
max_retries = 3
retry_backoff = "30s"

[executors.claude]
command = ["claude"]
# model = "claude-sonnet-4-5"
# max_budget_usd = 2.0
"""


def find_home(explicit: str | None, cwd: Path | None = None) -> Path:
    """The home to use; raises ``HomeError`` when none is given or found."""
    if explicit is not None:
        return _existing(Path(explicit), "--home")
    env = os.environ.get("VIGIL_HOME")
    if env:
        return _existing(Path(env), "VIGIL_HOME")
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / CONFIG_NAME).is_file():
            return folder
    raise HomeError(f"no {CONFIG_NAME} here or above {start}; pass --home, set VIGIL_HOME, or run 'vigil init'")


def _existing(path: Path, given_by: str) -> Path:
    path = path.expanduser().resolve()
    if not path.exists():
        raise HomeError(f"home {path} (from {given_by}) does not exist; create it with 'vigil init {path}'")
    if not path.is_dir():
        raise HomeError(f"home {path} (from {given_by}) is not a folder")
    if not (path / CONFIG_NAME).is_file():
        # Refuse rather than silently create a database in an arbitrary folder.
        raise HomeError(f"{path} (from {given_by}) is not a Vigil home: no {CONFIG_NAME}; run 'vigil init {path}'")
    return path


def init_home(path: Path) -> list[Path]:
    """Create a new home at ``path``; returns what was created. Never overwrites."""
    path = path.expanduser().resolve()
    if (path / CONFIG_NAME).exists():
        raise HomeError(f"{path} is already a Vigil home ({CONFIG_NAME} exists)")
    created: list[Path] = []
    path.mkdir(parents=True, exist_ok=True)
    config = path / CONFIG_NAME
    config.write_text(NEW_HOME_CONFIG, encoding="utf-8")
    created.append(config)
    for name, mode in (("skills", 0o755), ("logs", 0o700), ("data", 0o700)):
        folder = path / name
        if not folder.exists():
            folder.mkdir(mode=mode)
            created.append(folder)
    return created
