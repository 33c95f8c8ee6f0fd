"""`vigil doctor` runs the real codex: its version, whether it can authenticate,
and the credential variables that would not reach the agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.clis import PINNED, needs_codex
from tests.agents.codex_home import CodexHome
from tests.agents.openai_api import PROVIDER

pytestmark = [needs_codex, pytest.mark.slow]


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


def test_a_new_home_reports_its_workspace_sandbox_and_prices(tmp_path: Path) -> None:
    home = CodexHome.initialised(tmp_path, "http://127.0.0.1:9")
    proc = home.vigil("doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines(proc.stdout, "workspace") == [
        f"ok    workspace  each task works in a folder of its own under {home.path / 'work'}, kept 7 d after it ends"
    ]
    assert lines(proc.stdout, "sandbox") == [
        "ok    sandbox    codex: workspace-write: the agent writes only in its workspace"
    ]
    # the model is named only in Codex's own config.toml, and priced by the table Vigil ships
    (prices,) = lines(proc.stdout, "prices")
    assert prices.startswith("ok    prices     codex: gpt-5-codex at $1.25 in / $10 out per million tokens")
    assert lines(proc.stdout, "reach") == []


def test_an_unpriced_model_under_a_budget_fails_and_full_access_is_a_warning(tmp_path: Path) -> None:
    home = CodexHome.create(
        tmp_path, "http://127.0.0.1:9", codex={"model": "house-model-1", "sandbox": "danger-full-access"}
    )
    with (home.path / "vigil.toml").open("a") as config:
        config.write("\n[budget]\ndaily_usd = 5.0\n")
    proc = home.vigil("doctor")
    (prices,) = lines(proc.stdout, "prices")
    assert prices.startswith("FAIL")  # every task under the budget would be refused
    assert "'house-model-1' has no price" in prices
    assert "under the daily budget every task is refused" in prices
    assert proc.returncode == 1
    (reach,) = lines(proc.stdout, "reach")
    assert reach.startswith("warn")
    assert "danger-full-access" in reach
