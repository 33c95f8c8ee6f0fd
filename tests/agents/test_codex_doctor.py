"""`vigil doctor` runs the real codex: its version, whether it can authenticate,
and the credential variables that would not reach the agent."""

from __future__ import annotations

from pathlib import Path

from tests.agents.clis import PINNED, needs_codex
from tests.agents.codex_home import CodexHome
from tests.agents.openai_api import PROVIDER

pytestmark = needs_codex


def lines(output: str, what: str) -> list[str]:
    return [line for line in output.splitlines() if line.split()[1:2] == [what]]


def test_a_home_whose_codex_has_its_key_is_healthy(tmp_path: Path) -> None:
    home = CodexHome.create(tmp_path, "http://127.0.0.1:9")
    proc = home.vigil("doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (version,) = lines(proc.stdout, "codex")
    assert version.startswith("ok")
    assert PINNED["codex"] in version
    (login,) = lines(proc.stdout, "login")
    assert login.startswith("ok")
    assert f"provider {PROVIDER!r} takes its key from OPENAI_API_KEY" in login


def test_codex_without_a_login_or_key_fails_with_what_to_do(tmp_path: Path) -> None:
    home = CodexHome.create(tmp_path, "http://127.0.0.1:9")
    proc = home.vigil("doctor", OPENAI_API_KEY="")  # set, but empty
    assert proc.returncode == 1
    (login,) = lines(proc.stdout, "login")
    assert login.startswith("FAIL")
    assert "Not logged in" in login
    assert "codex login" in login


def test_the_builtin_provider_does_not_read_openai_api_key(tmp_path: Path) -> None:
    home = CodexHome.create(tmp_path, "http://127.0.0.1:9")
    (home.config_dir / "config.toml").write_text('model = "gpt-5-codex"\n')
    proc = home.vigil("doctor")
    assert proc.returncode == 1
    (login,) = lines(proc.stdout, "login")
    assert login.startswith("FAIL")
    assert "does not read OPENAI_API_KEY" in login
    assert "codex login --with-api-key" in login


def test_a_provider_key_that_would_not_reach_the_agent_is_named(tmp_path: Path) -> None:
    home = CodexHome.create(tmp_path, "http://127.0.0.1:9", codex={"sandbox": "read-only"})
    config = home.config_dir / "config.toml"
    config.write_text(config.read_text().replace('env_key = "OPENAI_API_KEY"', 'env_key = "AZURE_KEY"'))
    proc = home.vigil("doctor", AZURE_KEY="secret")
    assert proc.returncode == 1
    codex = lines(proc.stdout, "codex")
    assert any(
        line.startswith("FAIL") and "AZURE_KEY is set here but would not reach the agent" in line for line in codex
    )
    (sandbox,) = lines(proc.stdout, "sandbox")
    assert sandbox.startswith("warn")
    assert "secret" not in proc.stdout
