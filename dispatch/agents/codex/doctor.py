"""``vigil doctor``'s checks of the ``codex`` executor, run for real
(``dispatch.agents.doctor`` calls them when Codex is the configured executor).

They run Codex as an agent run would (the same argv prefix, the environment an
agent gets, in the working directory) and say what is wrong and what to do:

- that the working directory exists, and Codex's version (``codex --version``);
- whether it can authenticate: ``codex login status`` (a login stored under
  ``CODEX_HOME``), else a key in a variable it reads — the ``env_key`` of the model
  provider named in ``$CODEX_HOME/config.toml``, or ``CODEX_API_KEY``;
- credential variables set in this environment that would not reach the agent;
- ``OPENAI_API_KEY`` set for Codex's built-in OpenAI provider, which does not read
  it (Codex 0.171.0 sends no key at all then).

The sandbox and the workspace are reported by ``dispatch.agents.doctor``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from dispatch.agents.cli import Run, started
from vigil import agent_clis
from vigil.config import Settings
from vigil.doctor import Finding

BUILTIN_PROVIDER = "openai"
KEY_NAMES = ("CODEX_API_KEY", "OPENAI_API_KEY", "CODEX_HOME")  # what Codex reads besides a provider's env_key


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


async def codex_findings(settings: Settings, run: Run, source: Mapping[str, str] | None = None) -> list[Finding]:
    """What is right and wrong with the ``codex`` executor here. ``run`` runs a short
    CLI call (exit code, None when it could not start or timed out, and output);
    ``source`` is the environment the loop would start from (default: this
    process's)."""
    here = await started(settings, agent_clis.CODEX, run, source, _said)
    if isinstance(here, Finding):
        return [here]
    origin, agent, cwd, argv = here.origin, here.env, here.cwd, here.command
    found = [Finding("ok", "codex", _said(here.version))]

    provider, env_key = _provider(agent)
    for name in (*KEY_NAMES, *([env_key] if env_key else [])):
        if origin.get(name) and name not in agent:
            found.append(
                Finding(
                    "fail", "codex", f"{name} is set here but would not reach the agent: add it to [dispatch] pass_env"
                )
            )

    code, output = await run([*argv, "login", "status"], agent, cwd)
    if code == 0:
        found.append(Finding("ok", "login", f"codex: {_said(output)}"))
    elif env_key and agent.get(env_key):
        found.append(Finding("ok", "login", f"codex: provider {provider!r} takes its key from {env_key}, which is set"))
    elif agent.get("CODEX_API_KEY"):
        found.append(Finding("ok", "login", "codex: not logged in, but CODEX_API_KEY is set"))
    elif provider == BUILTIN_PROVIDER and agent.get("OPENAI_API_KEY"):
        found.append(
            Finding(
                "fail",
                "login",
                "codex is not logged in, and its OpenAI provider does not read OPENAI_API_KEY: "
                "run `printenv OPENAI_API_KEY | codex login --with-api-key`, or export CODEX_API_KEY",
            )
        )
    else:
        key = env_key or "CODEX_API_KEY"
        found.append(
            Finding("fail", "login", f"codex is not logged in ({_said(output)}): run `codex login`, or export {key}")
        )
    return found
