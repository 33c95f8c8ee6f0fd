"""A sandbox that does not start, with the real CLIs against the scripted model
server: ``vigil doctor`` fails with the sandbox's own words and the fix, and a
run under it, in which every command the agent tries fails, is not a success
whatever the agent says.

Each sandbox is broken the way machines break it:

* Codex 0.171.0 makes the helper its Linux sandbox starts through
  (``codex-linux-sandbox``) only when ``CODEX_HOME`` lies outside the temporary
  folder; with ``TMPDIR=/tmp`` and the tests' ``CODEX_HOME`` under ``/tmp``, every
  command fails with ``bwrap: execvp codex-linux-sandbox: No such file or
  directory``;
* Claude Code runs each Bash command through the ``bwrap`` on its ``PATH``; a
  ``bwrap`` that fails as it does where user namespaces are refused (Ubuntu 24.04's
  default) comes first on the operator's ``PATH``. The checks' sandbox uses the
  same ``bwrap``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents import anthropic_api, openai_api
from tests.agents.clis import needs_bwrap, needs_claude, needs_codex
from tests.agents.codex_home import CodexHome
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Text, ToolCall

pytestmark = pytest.mark.slow  # each runs the real vigil and a real agent CLI

NO_SERVER = "http://127.0.0.1:9"  # doctor never calls the model
USERNS_REFUSED = "bwrap: setting up uid map: Permission denied"
NO_HELPER = "bwrap: execvp codex-linux-sandbox: No such file or directory"


def lines(output: str, what: str) -> list[str]:
    return [line for line in output.splitlines() if line.split()[1:2] == [what]]


def refusing_bwrap(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with a ``bwrap`` first on its ``PATH`` that cannot make namespaces."""
    folder = tmp_path / "refusing-bwrap"
    folder.mkdir()
    bwrap = folder / "bwrap"
    bwrap.write_text(f"#!/bin/sh\necho '{USERNS_REFUSED}' >&2\nexit 1\n")
    bwrap.chmod(0o755)
    return {**env, "PATH": f"{folder}:{env['PATH']}"}


@needs_claude
@needs_bwrap
def test_doctor_fails_when_claude_codes_sandbox_and_the_checks_sandbox_do_not_start(tmp_path: Path) -> None:
    home = ClaudeHome.make(tmp_path, NO_SERVER)
    proc = home.vigil_with_env("doctor", env=refusing_bwrap(tmp_path, home.env()))
    assert proc.returncode == 1, proc.stdout
    (sandbox,) = lines(proc.stdout, "sandbox")
    assert sandbox.startswith("FAIL  sandbox    claude: the OS sandbox for Bash does not start"), sandbox
    assert USERNS_REFUSED in sandbox
    assert "allow unprivileged user namespaces" in sandbox
    assert "bash_sandbox = false" in sandbox
    (checks,) = lines(proc.stdout, "checks")
    assert checks.startswith("FAIL  checks     a task's checks cannot start in bubblewrap"), checks
    assert USERNS_REFUSED in checks
    assert "check_sandbox = false" in checks


@needs_claude
@needs_bwrap
def test_a_claude_run_whose_sandbox_does_not_start_is_not_a_success(tmp_path: Path) -> None:
    with anthropic_api.anthropic_server() as api:
        home = ClaudeHome.make(tmp_path, api.server.url)
        task_id = home.add_task("Write the file")
        api.script.add(ToolCall("Bash", {"command": "echo hello > out.txt"}), Text("Done: out.txt is written."))
        proc = home.vigil_with_env("dispatch", "once", env=refusing_bwrap(tmp_path, home.env()))
    assert proc.returncode == 0, proc.stderr
    (run,) = home.runs(task_id)
    assert run["outcome"] == "sandbox_failed", run["error"]
    assert run["error"].startswith("the CLI's sandbox did not start 1 command")
    assert f"Bash: echo hello > out.txt ({USERNS_REFUSED})" in run["error"]
    task = home.task(task_id)
    assert (task["status"], task["attempt_count"]) == ("pending", 1)  # retried, never completed
    assert not (home.path / "work" / str(task_id) / "out.txt").exists()


@needs_codex
def test_doctor_fails_when_codexs_sandbox_does_not_start_and_says_why(tmp_path: Path) -> None:
    home = CodexHome.create(tmp_path, NO_SERVER)
    healthy = home.vigil("doctor")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert lines(healthy.stdout, "sandbox") == [
        "ok    sandbox    codex: workspace-write: the agent writes only in its workspace"
    ]
    proc = home.vigil("doctor", TMPDIR="/tmp")
    assert proc.returncode == 1, proc.stdout
    failed = [line for line in lines(proc.stdout, "sandbox") if line.startswith("FAIL")]
    assert len(failed) == 1, proc.stdout
    assert NO_HELPER in failed[0]
    assert "Refusing to create helper binaries" in failed[0]  # Codex's own warning, kept
    assert "move CODEX_HOME" in failed[0]


@needs_codex
def test_a_codex_run_whose_sandbox_does_not_start_is_not_a_success(tmp_path: Path) -> None:
    with openai_api.openai_server() as api:
        home = CodexHome.create(tmp_path, api.server.url)
        task_id = home.add_task("Write the file")
        api.script.add(openai_api.shell("echo hello > out.txt"), Text("Done: out.txt is written."))
        proc = home.vigil("dispatch", "once", TMPDIR="/tmp")
        outputs = api.tool_outputs()
    assert proc.returncode == 0, proc.stderr
    assert any(NO_HELPER in out for out in outputs), outputs
    (run,) = home.runs(task_id)
    assert run["outcome"] == "sandbox_failed", run["error"]
    assert f"exec_command: echo hello > out.txt ({NO_HELPER})" in run["error"]
    task = home.task(task_id)
    assert (task["status"], task["attempt_count"]) == ("pending", 1)
    assert not (home.path / "work" / str(task_id) / "out.txt").exists()
