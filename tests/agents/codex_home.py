"""Vigil homes that run the real Codex against the local model server.

Like ``ClaudeHome``: the home's ``vigil.toml`` sets only the executor, the CLI's
path and what a test asks for, and each ``vigil`` call gets an operator's
environment with Codex's own variables (``CODEX_HOME``, whose ``config.toml``
points Codex at the local server and names the model, and ``OPENAI_API_KEY``),
which a default home must hand to the agent by itself.

The operator's ``TMPDIR`` is a folder of the test's own: Codex 0.171.0 makes the
helper its Linux sandbox starts through (``codex-linux-sandbox``) only when
``CODEX_HOME`` is not inside the temporary folder, and the tests' folders are all
under ``/tmp``. An operator's ``~/.codex`` never is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.agents.clis import codex_path
from tests.agents.homes import ClaudeHome, operator_path, toml_value, vigil_init
from tests.agents.openai_api import codex_config
from vigil.home import init_home

TEST_KEY = "sk-test-0000"
# USD per million tokens of the model the test config names (gpt-5-codex), as the
# price table Vigil ships has it: a home needs no [prices] for it
PRICES = {"input": 1.25, "output": 10.0, "cache_read": 0.125, "cache_write": 0.0}


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
        (home / "vigil.toml").write_text("\n".join(lines) + "\n")
        return cls(home, url, _codex_home(tmp_path, url))

    @classmethod
    def initialised(cls, tmp_path: Path, url: str) -> CodexHome:
        """A home made by ``vigil init`` with only the executor line changed."""
        return cls(vigil_init(tmp_path / "home", "codex"), url, _codex_home(tmp_path, url))

    def env(self, **extra: str) -> dict[str, str]:
        """The operator's environment: Codex's variables set, nothing of Vigil's;
        the agent CLIs' folder first on ``PATH``, a temporary folder of its own."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIGIL_", "OPENAI_", "CODEX_"))}
        env.update({"CODEX_HOME": str(self.config_dir), "OPENAI_API_KEY": TEST_KEY, "PATH": operator_path()})
        env["TMPDIR"] = str(self.config_dir.parent / "operator-tmp")
        env.update(extra)
        return env


def _codex_home(tmp_path: Path, url: str) -> Path:
    codex_home = tmp_path / "codex-home"
    codex_config(codex_home, url)
    (tmp_path / "operator-tmp").mkdir()
    return codex_home
