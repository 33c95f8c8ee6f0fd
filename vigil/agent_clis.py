"""The agent CLIs as the core knows them: pure data, one ``CliFacts`` per CLI.

The core may not import ``dispatch``, yet it reads a CLI's settings table
(``vigil.config``), names its accounts (``vigil.accounts``) and checks their logins
(``vigil.doctor``). What it needs of each CLI is here, as data; everything a CLI
does (its executor, stream, sandbox, doctor checks, pricing) lives in its folder,
``dispatch/agents/<name>/``, whose ``AgentCli`` builds on these facts. Nothing
outside ``dispatch/agents/`` compares a CLI's name: it looks the name up here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CliVariables:
    """The variables one agent CLI reads: names with these ``prefixes``, the exact
    ``names``, and the ``cloud`` ones only while one of ``cloud_switches`` is set."""

    prefixes: tuple[str, ...]
    names: tuple[str, ...] = ()
    cloud_switches: tuple[str, ...] = ()
    cloud: tuple[str, ...] = ()

    def pick(self, origin: Mapping[str, str]) -> dict[str, str]:
        picked = {k: v for k, v in origin.items() if k.startswith(self.prefixes) or k in self.names}
        if any(origin.get(switch) for switch in self.cloud_switches):
            picked.update({k: v for k, v in origin.items() if k.startswith(self.cloud)})
        return picked


@dataclass(frozen=True)
class CliFacts:
    """One agent CLI. ``name`` is its executor's name and its ``[executors.NAME]``
    table; the table's keys beyond the common ones are ``choices`` (key → allowed
    values), ``lists`` (lists of strings) and ``flags`` (true or false).

    An account is selected by its folder, named by the account key ``folder_key``
    and passed as ``folder_variable``, or by its key, passed as ``key_variables``;
    the CLI's other ``credentials`` are then taken away. ``install`` says how a
    person installs the CLI, ``login`` how they log a folder in (``{}``: the folder). ``variables``: what of ``vigil
    run``'s environment reaches the CLI. ``cost_figure``: the CLI's own figure of
    what a run cost, in words, when it reports one (that figure is the run's spend,
    and a cap is passed to the CLI to hold by it); None: its runs are priced by
    their tokens alone."""

    name: str
    folder_key: str
    folder_variable: str
    key_variables: tuple[str, ...]
    credentials: tuple[str, ...]
    install: str
    login: str
    variables: CliVariables
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    lists: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    cost_figure: str | None = None


# Claude Code's permission modes (2.1.197). bypassPermissions is refused as root.
CLAUDE_PERMISSION_MODES = ("default", "acceptEdits", "auto", "dontAsk", "plan", "bypassPermissions")
# Codex's sandbox modes (0.171.0). workspace-write: the agent may write in its
# workspace (and add_dirs), nowhere else.
CODEX_SANDBOXES = ("read-only", "workspace-write", "danger-full-access")

CLAUDE = CliFacts(
    "claude",
    folder_key="config_dir",
    folder_variable="CLAUDE_CONFIG_DIR",
    key_variables=("ANTHROPIC_API_KEY",),
    credentials=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
    install="Claude Code (npm install -g @anthropic-ai/claude-code)",
    login="CLAUDE_CONFIG_DIR={} claude, then /login",
    # ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL, ANTHROPIC_MODEL …;
    # CLAUDE_CODE_OAUTH_TOKEN, CLAUDE_CODE_USE_BEDROCK / _VERTEX, CLAUDE_CONFIG_DIR …
    variables=CliVariables(
        prefixes=("ANTHROPIC_", "CLAUDE_CODE_"),
        names=("CLAUDE_CONFIG_DIR",),
        cloud_switches=("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"),
        cloud=("AWS_", "CLOUD_ML_REGION", "VERTEX_REGION_", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_"),
    ),
    choices={"permission_mode": CLAUDE_PERMISSION_MODES},
    lists=("allowed_tools", "disallowed_tools", "add_dirs"),
    flags=("bash_sandbox",),
    cost_figure="Claude Code's total_cost_usd",
)
CODEX = CliFacts(
    "codex",
    folder_key="codex_home",
    folder_variable="CODEX_HOME",
    key_variables=("CODEX_API_KEY", "OPENAI_API_KEY"),
    credentials=("CODEX_API_KEY",),
    install="Codex (npm install -g @openai/codex)",
    login="CODEX_HOME={} codex login",
    # OPENAI_API_KEY, OPENAI_BASE_URL …; CODEX_HOME …
    variables=CliVariables(prefixes=("OPENAI_", "CODEX_")),
    choices={"sandbox": CODEX_SANDBOXES},
    lists=("add_dirs",),
)

CLI_FACTS: Mapping[str, CliFacts] = {cli.name: cli for cli in (CLAUDE, CODEX)}
