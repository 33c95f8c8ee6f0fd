"""Vigil homes that run the real Codex against the local model server.

Like ``ClaudeHome``: the home's ``vigil.toml`` sets only the executor, the CLI's
path and what a test asks for, and each ``vigil`` call gets an operator's
environment with Codex's own variables (``CODEX_HOME``, whose ``config.toml``
points Codex at the local server, and ``OPENAI_API_KEY``), which a default home
must hand to the agent by itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.agents.clis import codex_path
from tests.agents.homes import ClaudeHome, toml_value
from tests.agents.openai_api import codex_config
from vigil.home import init_home

TEST_KEY = "sk-test-0000"
# USD per million tokens for the model the test config names
PRICES = {"input": 1.25, "output": 10.0, "cache_read": 0.125, "cache_write": 2.5}


@dataclass
class CodexHome(ClaudeHome):
    """A home whose executor is the real ``codex``; ``config_dir`` is its ``CODEX_HOME``."""

    @classmethod
    def create(
        cls,
        tmp_path: Path,
        url: str,
        *,
        dispatch: dict[str, Any] | None = None,
        codex: dict[str, Any] | None = None,
    ) -> CodexHome:
        home = tmp_path / "home"
        init_home(home)
        lines = ["[dispatch]", 'executor = "codex"']
        lines += [f"{key} = {toml_value(value)}" for key, value in (dispatch or {}).items()]
        lines += ["", "[executors.codex]", f"command = {toml_value([str(codex_path())])}"]
        lines += [f"{key} = {toml_value(value)}" for key, value in (codex or {}).items()]
        lines += ["", '[prices."gpt-5-codex"]']
        lines += [f"{key} = {value}" for key, value in PRICES.items()]
        (home / "vigil.toml").write_text("\n".join(lines) + "\n")
        codex_home = tmp_path / "codex-home"
        codex_config(codex_home, url)
        return cls(home, url, codex_home)

    def env(self, **extra: str) -> dict[str, str]:
        """The operator's environment: Codex's variables set, nothing of Vigil's."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIGIL_", "OPENAI_", "CODEX_"))}
        env.update({"CODEX_HOME": str(self.config_dir), "OPENAI_API_KEY": TEST_KEY})
        env.update(extra)
        return env
