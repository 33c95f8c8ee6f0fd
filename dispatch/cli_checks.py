"""``vigil doctor``'s checks of the configured agent CLI, run for real.

They run the CLI as an agent run would (the same argv prefix, the environment an
agent gets, in the home) and say what is wrong and what to do. For ``codex``:

- its version (``codex --version``);
- whether it can authenticate: ``codex login status`` (a login stored under
  ``CODEX_HOME``), else a key in a variable it reads — the ``env_key`` of the model
  provider named in ``$CODEX_HOME/config.toml``, or ``CODEX_API_KEY``;
- credential variables set in this environment that would not reach the agent;
- ``OPENAI_API_KEY`` set for Codex's built-in OpenAI provider, which does not read
  it (Codex 0.171.0 sends no key at all then);
- a ``read-only`` sandbox, in which the agent's ``vigil task …`` calls cannot write.

Each finding is ``(level, what, detail)`` with level ``ok``, ``warn`` or ``fail``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path

from dispatch.environment import base_env
from vigil.config import Settings
from vigil.doctor import Finding

CHECK_TIMEOUT_S = 20.0
BUILTIN_PROVIDER = "openai"
KEY_NAMES = ("CODEX_API_KEY", "OPENAI_API_KEY", "CODEX_HOME")  # what Codex reads besides a provider's env_key


def _run(argv: list[str], env: Mapping[str, str], cwd: Path) -> tuple[int, str]:
    """Exit code and output (stdout then stderr) of a short CLI call; raises
    ``OSError`` or ``subprocess.TimeoutExpired``."""
    done = subprocess.run(
        argv,
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def _said(output: str) -> str:
    """The CLI's message without Codex's PATH-alias warning."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    meant = [line for line in lines if not line.startswith("WARNING")]
    return " ".join(meant) or " ".join(lines)


def _provider(env: Mapping[str, str]) -> tuple[str, str | None]:
    """The model provider ``$CODEX_HOME/config.toml`` selects and the variable its
    key is read from (None: none is named). Unreadable config: the built-in one."""
    codex_home = Path(env.get("CODEX_HOME") or Path(env.get("HOME", "~")) / ".codex").expanduser()
    try:
        config = tomllib.loads((codex_home / "config.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return BUILTIN_PROVIDER, None
    name = config.get("model_provider", BUILTIN_PROVIDER)
    providers = config.get("model_providers", {})
    entry = providers.get(name) if isinstance(providers, dict) else None
    env_key = entry.get("env_key") if isinstance(entry, dict) else None
    return str(name), env_key if isinstance(env_key, str) else None


def codex_findings(settings: Settings, source: Mapping[str, str] | None = None) -> list[Finding]:
    """What is right and wrong with the ``codex`` executor here. ``source`` is the
    environment the loop would start from (default: this process's)."""
    origin = os.environ if source is None else source
    agent = base_env(settings, source=origin, executor="codex")
    argv = list(settings.codex.command)
    found: list[Finding] = []
    if shutil.which(argv[0], path=agent.get("PATH")) is None:
        return found  # the executor line of `vigil doctor` says so already
    try:
        code, output = _run([*argv, "--version"], agent, settings.home)
    except (OSError, subprocess.TimeoutExpired) as err:
        return [("fail", "codex", f"cannot run {argv[0]!r}: {err} (check [executors.codex] command)")]
    if code != 0:
        return [("fail", "codex", f"{argv[0]} --version failed (exit code {code}): {_said(output)}")]
    found.append(("ok", "codex", _said(output)))

    provider, env_key = _provider(agent)
    for name in (*KEY_NAMES, *([env_key] if env_key else [])):
        if origin.get(name) and name not in agent:
            found.append(
                ("fail", "codex", f"{name} is set here but would not reach the agent: add it to [dispatch] pass_env")
            )

    try:
        code, output = _run([*argv, "login", "status"], agent, settings.home)
    except (OSError, subprocess.TimeoutExpired) as err:
        code, output = 1, str(err)
    if code == 0:
        found.append(("ok", "login", f"codex: {_said(output)}"))
    elif env_key and agent.get(env_key):
        found.append(("ok", "login", f"codex: provider {provider!r} takes its key from {env_key}, which is set"))
    elif agent.get("CODEX_API_KEY"):
        found.append(("ok", "login", "codex: not logged in, but CODEX_API_KEY is set"))
    elif provider == BUILTIN_PROVIDER and agent.get("OPENAI_API_KEY"):
        found.append(
            (
                "fail",
                "login",
                "codex is not logged in, and its OpenAI provider does not read OPENAI_API_KEY: "
                "run `printenv OPENAI_API_KEY | codex login --with-api-key`, or export CODEX_API_KEY",
            )
        )
    else:
        key = env_key or "CODEX_API_KEY"
        found.append(("fail", "login", f"codex is not logged in ({_said(output)}): run `codex login`, or export {key}"))

    if settings.codex.sandbox == "read-only":
        found.append(
            ("warn", "sandbox", "codex: read-only: the agent's `vigil task …` calls cannot write the database")
        )
    return found


def agent_cli_findings(settings: Settings) -> list[Finding]:
    """The findings for the configured executor's CLI (none for the others)."""
    if settings.dispatch.executor == "codex":
        return codex_findings(settings)
    return []
