"""Vigil homes that run the real Claude Code against the local model server, and a
runner for the real ``vigil`` in a subprocess.

The home's ``vigil.toml`` changes nothing but the executor line and the CLI's path
(plus what a test asks for), so each test shows what a new user's home does;
``initialised`` goes further: ``vigil init`` exactly as a new user runs it, with
only the executor line changed (the CLI is found on the operator's ``PATH``). The
operator's environment of each ``vigil`` call holds the model server's URL, a
throwaway key and a config folder of the test's own: a default home must hand them
to the agent by itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.agents.clis import bin_dir, claude_env, claude_path
from vigil.clock import SystemClock
from vigil.gate import GATE_KEY, LoopGate, gate_json
from vigil.home import init_home
from vigil.models import NewTask
from vigil.store.sqlite import SqliteStore


def toml_value(value: Any) -> str:
    return json.dumps(value)  # JSON strings, numbers, lists and booleans are TOML too


def operator_path() -> str:
    """The operator's ``PATH`` with the agent CLIs' folder first, as after a global
    ``npm install`` of them."""
    return os.pathsep.join([str(bin_dir()), os.environ.get("PATH", "/usr/bin:/bin")])


def vigil_init(home: Path, executor: str) -> Path:
    """``vigil init HOME`` run for real, then its ``executor = "dry-run"`` line
    changed to ``executor``, and nothing else."""
    subprocess.run([sys.executable, "-m", "vigil", "init", str(home)], check=True, capture_output=True)
    config = home / "vigil.toml"
    text = config.read_text()
    assert text.count('executor = "dry-run"') == 1, text
    config.write_text(text.replace('executor = "dry-run"', f'executor = "{executor}"'))
    return home


@dataclass
class ClaudeHome:
    """A home whose executor is the real ``claude``; ``url`` is the model server's."""

    path: Path
    url: str
    config_dir: Path

    @classmethod
    def make(
        cls,
        tmp_path: Path,
        url: str,
        *,
        dispatch: dict[str, Any] | None = None,
        claude: dict[str, Any] | None = None,
    ) -> ClaudeHome:
        home = tmp_path / "home"
        init_home(home)
        lines = ["[dispatch]", 'executor = "claude"']
        lines += [f"{key} = {toml_value(value)}" for key, value in (dispatch or {}).items()]
        claude = {"command": [str(claude_path())], **(claude or {})}
        lines += ["", "[executors.claude]"]
        lines += [f"{key} = {toml_value(value)}" for key, value in claude.items()]
        (home / "vigil.toml").write_text("\n".join(lines) + "\n")
        config_dir = tmp_path / "operator"
        config_dir.mkdir()
        return cls(home, url, config_dir)

    @classmethod
    def initialised(cls, tmp_path: Path, url: str) -> ClaudeHome:
        """A home made by ``vigil init`` with only the executor line changed."""
        home = vigil_init(tmp_path / "home", "claude")
        config_dir = tmp_path / "operator"
        config_dir.mkdir()
        return cls(home, url, config_dir)

    def env(self, **extra: str) -> dict[str, str]:
        """The operator's environment: the CLI's variables set, nothing of Vigil's;
        the agent CLIs' folder first on ``PATH``."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIGIL_", "ANTHROPIC_", "CLAUDE_"))}
        env.update(claude_env(self.url, self.config_dir, path=operator_path()))
        env.update(extra)
        return env

    def vigil(self, *args: str, timeout: float = 90, **extra_env: str) -> subprocess.CompletedProcess[str]:
        return self.vigil_with_env(*args, env=self.env(**extra_env), timeout=timeout)

    def vigil_with_env(self, *args: str, env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
        """``vigil ARGS`` with exactly ``env`` as the operator's environment."""
        return subprocess.run(
            [sys.executable, "-m", "vigil", "--home", str(self.path), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )

    def add_task(self, subject: str, *args: str) -> int:
        """Add a task: through ``vigil task add ARGS`` when there are options, else
        straight into the store (a second saved per test)."""
        if args:
            proc = self.vigil("task", "add", subject, *args, "--json")
            assert proc.returncode == 0, proc.stderr
            return int(json.loads(proc.stdout)["id"])

        async def add() -> int | None:
            store = await SqliteStore.open(self.path / "data" / "vigil.db")
            try:
                return (await store.add_task(NewTask(subject))).task_id
            finally:
                await store.close()

        task_id = asyncio.run(add())
        assert task_id is not None
        return task_id

    def rows(self, sql: str, *params: Any) -> list[sqlite3.Row]:
        conn = sqlite3.connect(self.path / "data" / "vigil.db")
        conn.row_factory = sqlite3.Row
        try:
            return list(conn.execute(sql, params))
        finally:
            conn.close()

    def task(self, task_id: int) -> sqlite3.Row:
        return self.rows("SELECT * FROM tasks WHERE id = ?", task_id)[0]

    def runs(self, task_id: int) -> list[sqlite3.Row]:
        return self.rows("SELECT * FROM runs WHERE task_id = ? ORDER BY id", task_id)

    def notes(self, task_id: int) -> list[tuple[str, str]]:
        """The task's notes as (author, text), oldest first."""
        rows = self.rows("SELECT author, text FROM notes WHERE task_id = ? ORDER BY id", task_id)
        return [(row["author"], row["text"]) for row in rows]

    def completed_by(self, task_id: int) -> list[str]:
        """Who moved the task to completed, per the audit trail."""
        rows = self.rows(
            "SELECT actor FROM task_events WHERE task_id = ? AND kind = 'status' AND to_value = 'completed'", task_id
        )
        return [row["actor"] for row in rows]

    def transcript(self, run: sqlite3.Row) -> list[dict[str, Any]]:
        lines = Path(run["transcript_path"]).read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def status(self) -> dict[str, Any]:
        proc = self.vigil("status", "--json")
        assert proc.returncode == 0, proc.stderr
        parsed: dict[str, Any] = json.loads(proc.stdout)
        return parsed

    def gate(self) -> dict[str, Any]:
        """The gate as ``vigil status --json`` shows it, read from the file."""
        rows = self.rows("SELECT value FROM loop_state WHERE key = ?", GATE_KEY)
        raw = json.loads(rows[0]["value"]) if rows else None
        return gate_json(LoopGate.from_json(raw), SystemClock().now_ms())

    def start(self, *args: str, **extra_env: str) -> subprocess.Popen[str]:
        """``vigil ARGS`` in the background (stop it with ``stop``)."""
        return subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(self.path), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(**extra_env),
        )

    @staticmethod
    def stop(proc: subprocess.Popen[str]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()

    @staticmethod
    def wait_for(check: Callable[[], Any], timeout_s: float = 60) -> Any:
        """The first true value of ``check()``, polled; fails after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"not within {timeout_s}s: {check}")
